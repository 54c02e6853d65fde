# tq-provenance.json: every output directory (tq-mkmodel, tq-convert, tq-split and its
# --join) records the tool, tq's version, the command line (options spelled out, without the
# output directory and the options that never change bytes: --threads, --progress, --quiet,
# --json, --force, --dry-run) and the source's identity; tq-verify provenance shows it. An
# input's provenance is never copied into the next output; split.json lists the split's, so
# tq-verify check and manifest cover it; malformed documents are refused by name.
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
echo "provenance recorded, shown, checked and never copied"
