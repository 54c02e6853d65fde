# tq-provenance.json: every output directory (tq-mkmodel, tq-convert, tq-split and its
# --join) records the tool, tq's version, the command line (options spelled out, without the
# output directory and the options that never change bytes: --threads, --progress, --quiet,
# --json, --force, --dry-run) and the source's identity; tq-verify provenance shows it. An
# input's provenance is never copied into the next output; split.json lists the split's, so
# tq-verify check and manifest cover it; malformed documents are refused by name.
# tq-rowlayout's row file (one file, not a directory) carries it in its header's metadata,
# which MTPLX's loader passes over.
. "$ROOT/tests/lib/safety.sh"
run tq-mkmodel --quiet --threads 2 --progress plain --seed=4 --lay 1 m
tq-verify provenance m > pm || fail "provenance of m"
grep -qx 'command: tq-mkmodel --seed 4 --layers 1' pm || fail "mkmodel command: $(cat pm)"
grep -qx 'source: none (generated)' pm || fail "mkmodel source: $(cat pm)"
run tq-convert --quiet --threads 3 --json --bits=2 --keep o_proj m c > /dev/null
tq-verify provenance c > pc || fail "provenance of c"
grep -qx 'made by: tq-convert 0.1.0' pc || fail "convert tool: $(cat pc)"
grep -qx 'command: tq-convert --bits 2 --keep o_proj m' pc || fail "convert command: $(cat pc)"
h=$(head -c 8 m/model.safetensors | od -An -tu8 | tr -d ' ')
want=$(head -c $((8 + h)) m/model.safetensors | sha256sum | cut -d' ' -f1)
grep -qx "source: model.safetensors, $(stat -c %s m/model.safetensors) bytes, header SHA-256 $want" pc ||
  fail "convert source identity: $(cat pc)"
tq-verify provenance --json c > pj || fail "provenance --json"
[ "$(jget pj format)" = tq_provenance_v1 ] || fail "format"
# the same bytes whatever the thread count, the output's name or --force
run tq-convert --quiet --threads 1 --bits 2 --keep=o_proj m c-other
mkdir c-forced && echo x > c-forced/f
run tq-convert --quiet --force --bits 2 --keep o_proj m c-forced
cmp c/tq-provenance.json c-other/tq-provenance.json || fail "provenance depends on threads or output name"
cmp c/tq-provenance.json c-forced/tq-provenance.json || fail "provenance depends on --force"
# split: listed in split.json, checked by tq-verify check; the join writes its own
run tq-split --quiet --threads 2 c s
grep -q '"tq-provenance.json"' s/split.json || fail "split.json does not list tq-provenance.json"
tq-verify provenance s | grep -qx 'command: tq-split c' || fail "split command"
run tq-verify check --quiet s
run tq-split --quiet --join s j
tq-verify provenance j | grep -qx 'command: tq-split --join s' || fail "join command"
tq-verify provenance j | grep -q '^source: pinned.safetensors' || fail "join source"
# a model directory: tq-verify manifest lists it, check verifies it
run tq-verify manifest --quiet c
run tq-verify check --quiet c
# a changed provenance is caught by the split's check
sed -i "s/\"tq-split\"/\"tq-splix\"/" s/tq-provenance.json
tq-verify check s > chk; rc=$?
[ $rc -eq 1 ] && grep -q '^tq-provenance.json: sha256' chk || fail "check of a changed provenance: exit $rc, $(cat chk)"
# malformed or missing
mkdir bad
expect_msg 1 'no tq-provenance.json' tq-verify provenance bad
printf '[1]' > bad/tq-provenance.json
expect_msg 1 'not a tq_provenance_v1 document' tq-verify provenance bad
printf '{"format":"tq_provenance_v1","tool":"t","version":"v","command":[]}' > bad/tq-provenance.json
expect_msg 1 '"command" must be a non-empty array' tq-verify provenance bad
printf '{"format":"tq_provenance_v1","tool":"t","version":"v","command":["a",1]}' > bad/tq-provenance.json
expect_msg 1 '"command" must be a non-empty array' tq-verify provenance bad
printf '{"format":"tq_provenance_v1","tool":"t","version":"v","command":["a"],"source":{"files":[{"name":"x"}]}}' > bad/tq-provenance.json
expect_msg 1 'integer "size"' tq-verify provenance bad
printf '{"format":"tq_provenance_v1","tool":1,"version":"v","command":["a"]}' > bad/tq-provenance.json
expect_msg 1 '"tool" and "version"' tq-verify provenance bad
printf '{"format":' > bad/tq-provenance.json
expect_msg 1 'tq-provenance.json' tq-verify provenance bad
expect_msg 2 'expected one DIR' tq-verify provenance
expect_msg 1 'nothere: no such file or directory (expected an output directory of tq' tq-verify provenance nothere
# tq-rowlayout's one-file output carries the document in its header (__metadata__
# tq_provenance), written with the file; its command leaves out --out and --chunk-size
run tq-mkmodel --quiet --arch ngram --seed 2 ng
run tq-rowlayout --quiet --chunk-size 64k ng/model.safetensors --out r.rows
tq-verify provenance r.rows > pr || fail "provenance of r.rows"
h=$(head -c 8 ng/model.safetensors | od -An -tu8 | tr -d ' ')
want=$(head -c $((8 + h)) ng/model.safetensors | sha256sum | cut -d' ' -f1)
[ "$(cat pr)" = "made by: tq-rowlayout 0.1.0
command: tq-rowlayout ng/model.safetensors
source: model.safetensors, $(stat -c %s ng/model.safetensors) bytes, header SHA-256 $want" ] || fail "rowlayout: $(cat pr)"
run tq-rowlayout --quiet ng/model.safetensors --out other.rows
cmp r.rows other.rows || fail "a row file depends on its name or --chunk-size"
run tq-rowlayout --quiet ng/model.safetensors --out paged.rows --page-align 4096
tq-verify provenance paged.rows | grep -qx 'command: tq-rowlayout --page-align 4096 ng/model.safetensors' ||
  fail "paged rowlayout command: $(tq-verify provenance paged.rows)"
tq-verify provenance --json r.rows > prj && [ "$(jget prj tool)" = tq-rowlayout ] || fail "rowlayout --json"
# MTPLX's loader reads only format, source and parts from the metadata and wants the records
# right after the header: what it checks, done here on the file with the extra key
python3 - r.rows ng/model.safetensors <<'PY' || fail "r.rows: not loadable the way MTPLX loads a row cache"
import hashlib, json, os, struct, sys
def head(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n
rows_h, start = head(sys.argv[1])
src_h, _ = head(sys.argv[2])
st = os.stat(sys.argv[2])
ident = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "device": st.st_dev,
         "inode": st.st_ino, "header_sha256": hashlib.sha256(json.dumps(src_h, sort_keys=True).encode()).hexdigest()}
meta = rows_h["__metadata__"]
assert meta["format"] == "mtplx_ngram_rows_v1" and json.loads(meta["source"]) == ident, meta
parts = json.loads(meta["parts"])
assert dict(parts) == {k[len("ngram."):]: v for k, v in src_h.items() if k.startswith("ngram.")}, parts
rows, stride = rows_h["ngram.records"]["shape"]
assert os.stat(sys.argv[1]).st_size == start + rows * stride
assert json.loads(meta["tq_provenance"])["tool"] == "tq-rowlayout"
PY
# a safetensors file without the key, and malformed documents in it, refused by name
expect_msg 1 'ng/model.safetensors: a safetensors file without __metadata__ tq_provenance' tq-verify provenance ng/model.safetensors
with_meta() { # FILE VALUE: a one-tensor safetensors file whose __metadata__ tq_provenance is VALUE
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
h = json.dumps({"__metadata__": {"tq_provenance": sys.argv[2]},
                "t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0")
PY
}
with_meta bad1.safetensors '{"format":'
expect_msg 1 'bad1.safetensors: __metadata__ tq_provenance is not valid JSON' tq-verify provenance bad1.safetensors
with_meta bad2.safetensors '{"format":"tq_provenance_v1","tool":"t","version":"v","command":[]}'
expect_msg 1 'bad2.safetensors: __metadata__ tq_provenance: "command" must be a non-empty array' \
  tq-verify provenance bad2.safetensors
echo "provenance recorded, shown, checked and never copied"
