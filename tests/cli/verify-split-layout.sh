# tq-verify check on a split directory checks more than hashes: every layer file's header must
# parse as man tq-formats(5) says (MOE_FLASH_V1 AND FLASH_ALIGNED_V1) and agree with split.json,
# and config.json's streaming block must agree with split.json, even when every hash was
# rewritten to match the edit (against split.json itself, or a tq-manifest.json made after it).
# Consistency test: the rules are tq-formats(5)'s, the edits keep every length the same.
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch qwen3_moe --size tiny --seed 8 m >/dev/null || exit 1
tq-split --quiet m s || exit 1
run tq-verify check --quiet s

# hdr DIR FILE OLD NEW: replace OLD by NEW (same length) in FILE's header page, and record the
# new file in split.json (size, sha256, header_sha256) as if tq-split had written it so
hdr() {
  rm -rf "$1" && cp -r s "$1" || exit 1
  python3 - "$@" <<'EOF' || fail "could not edit $1/$2"
import hashlib, json, sys
d, name, old, new = sys.argv[1:5]
assert len(old) == len(new)
data = open(d + "/" + name, "rb").read()
assert data[:16384].count(old.encode()) == 1, old
data = data.replace(old.encode(), new.encode(), 1)
open(d + "/" + name, "wb").write(data)
sj = json.load(open(d + "/split.json"))
f = sj["files"][name]
f["sha256"] = hashlib.sha256(data).hexdigest()
if "header_bytes" in f:
    f["header_sha256"] = hashlib.sha256(data[:f["header_bytes"]]).hexdigest()
open(d + "/split.json", "w").write(json.dumps(sj, indent=2, sort_keys=True))
EOF
}
bad() { # bad DIR TEXT: check refuses DIR naming TEXT, against split.json and against a fresh manifest
  tq-verify check "$1" >out 2>err && fail "check passed $1 ($(cat out))"
  grep -q -- "$2" out || fail "check $1: no '$2' ($(cat out err))"
  rm -rf "$1-m" && cp -r "$1" "$1-m" && tq-verify manifest --quiet "$1-m" || fail "manifest of $1"
  tq-verify check "$1-m" >out 2>err && fail "check passed $1-m ($(cat out))"
  grep -q -- "$2" out || fail "check $1-m: no '$2' ($(cat out err))"
  return 0
}
hdr p1 experts/layer_00.bin '"page_size":16384' '"page_size":12345'
bad p1 '^experts/layer_00.bin: header: page_size 12345 is not a power of two'
hdr p2 experts/layer_01.bin '"layer_idx":1' '"layer_idx":0'
bad p2 '^experts/layer_01.bin: header: layer_idx 0 but split.json records 1'
# a number with leading zeros: not JSON
hdr p3 experts/layer_00.bin '"data_start":16384' '"data_start":00000'
bad p3 '^experts/layer_00.bin: header'
# config.json's streaming block against split.json
hdr p4 config.json '"page_size": 16384' '"page_size": 4096 '
bad p4 '^config.json: streaming.page_size is 4096 but split.json.s align is 16384'
hdr p5 config.json '"experts_per_tok": 2' '"experts_per_tok": 8'
bad p5 '^config.json: streaming.experts_per_tok is 8'
exit 0
