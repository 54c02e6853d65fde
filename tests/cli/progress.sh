# --progress: json lines parse, carry phase/done/total/bytes_per_s/eta_s/final, and are
# monotonic per phase with one final line each; every long phase reports (generating,
# quantizing, splitting, hashing, pack's compression, reading); CI=true gives plain lines,
# no CI and no terminal gives none, --quiet silences every mode; a JSON report on stdout
# stays clean.
. "$ROOT/tests/lib/common.sh"
unset CI
check_json() { # FILE PHASE...: every line is a progress object; each PHASE ends with final
  python3 - "$@" <<'PY' || fail "$1: $(head -c 600 "$1")"
import json, sys
path, want = sys.argv[1], sys.argv[2:]
last, finals = {}, []
for n, line in enumerate(open(path), 1):
    o = json.loads(line)
    assert sorted(o) == ["bytes_per_s", "done", "eta_s", "final", "phase", "total"], (n, o)
    p = o["phase"]
    assert p not in finals, f"line {n}: {p} reported after its final line"
    assert o["done"] >= last.get(p, 0), f"line {n}: {p} went back: {o['done']} < {last[p]}"
    assert o["done"] <= o["total"] and o["bytes_per_s"] >= 0, (n, o)
    assert o["eta_s"] is None or o["eta_s"] >= 0, (n, o)
    last[p] = o["done"]
    if o["final"]:
        finals.append(p)
assert finals == want, f"phases {finals}, expected {want}"
PY
}
tq-mkmodel --progress json --seed 5 --layers 4 --threads 1 m 2>p-mk.json || fail "mkmodel"
check_json p-mk.json generate
tq-convert --progress json --threads 1 m c >/dev/null 2>p-cv.json || fail "convert"
check_json p-cv.json quantize
tq-split --progress json c s >/dev/null 2>p-sp.json || fail "split"
check_json p-sp.json split
python3 - p-sp.json <<'PY' || fail "split's final progress line is not done == total: $(tail -1 p-sp.json)"
import json, sys
o = [json.loads(l) for l in open(sys.argv[1])][-1]
assert o["final"] and o["done"] == o["total"] > 0, o
PY
tq-split --progress json --join s j >/dev/null 2>p-jn.json || fail "join"
check_json p-jn.json verify join
tq-verify pack --progress json c -o c.tar.zst >/dev/null 2>p-pk.json || fail "pack"
check_json p-pk.json hash compress
tq-verify check --progress json c.tar.zst >/dev/null 2>p-ck.json || fail "check"
tq-verify ls --read --progress json c >/dev/null 2>p-ls.err || fail "ls --read"
grep '^{' p-ls.err >p-ls.json
check_json p-ls.json read
# A JSON report on stdout stays JSON with --progress json on stderr.
tq-convert --json --progress json m c2 >report.json 2>p-cv2.json || fail "convert --json"
python3 -c 'import json,sys; json.load(open("report.json"))' || fail "convert --json report"
check_json p-cv2.json quantize
# CI=true: plain lines, one at least per phase end; no CI, no terminal: nothing.
CI=true tq-convert m c3 >/dev/null 2>plain.err || fail "convert under CI"
grep -q "^tq-convert: quantize: done, .* in [0-9.]* s (.*/s)$" plain.err || fail "CI=true: $(cat plain.err)"
CI=false tq-convert m c4 >/dev/null 2>none.err || fail "convert CI=false"
[ ! -s none.err ] || fail "no terminal, no CI: progress printed: $(cat none.err)"
CI=true tq-convert --quiet m c5 >/dev/null 2>quiet.err || fail "convert --quiet"
tq-convert --quiet --progress json m c6 >/dev/null 2>>quiet.err || fail "convert --quiet --progress json"
[ ! -s quiet.err ] || fail "--quiet printed progress: $(cat quiet.err)"
# tty: a bar with rate and ETA, cleared at the end of the phase
tq-convert --progress tty m c7 >/dev/null 2>tty.err || fail "convert --progress tty"
grep -q "quantize: \[[#.]*\] .*/s ETA " tty.err || fail "tty: $(od -c tty.err | head)"
expect_msg 2 "progress" tq-convert --progress sometimes m c8
echo "progress: json monotonic in $(cat p-*.json | wc -l) lines; plain under CI=true"
