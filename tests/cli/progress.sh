# --progress: json lines parse, carry phase/done/total/bytes_per_s/eta_s/final, and are
# monotonic per phase with one final line each; every long phase reports (generating,
# quantizing, splitting, hashing, pack's compression, a bundle's check and unpack, reading),
# each phase's final line with done == total; CI=true gives plain lines (pack, unpack too),
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
complete() { # FILE: every phase's final line has done == total > 0
  python3 - "$1" <<'PY' || fail "$1: a final progress line is not done == total: $(grep '"final":true' "$1")"
import json, sys
for o in map(json.loads, open(sys.argv[1])):
    assert not o["final"] or o["done"] == o["total"] > 0, o
PY
}
tq-mkmodel --progress json --seed 5 --layers 4 --threads 1 m 2>p-mk.json || fail "mkmodel"
check_json p-mk.json generate
complete p-mk.json
tq-convert --progress json --threads 1 m c >/dev/null 2>p-cv.json || fail "convert"
check_json p-cv.json quantize
complete p-cv.json
tq-split --progress json c s >/dev/null 2>p-sp.json || fail "split"
check_json p-sp.json split
complete p-sp.json
tq-split --progress json --join s j >/dev/null 2>p-jn.json || fail "join"
check_json p-jn.json verify join
complete p-jn.json
tq-verify pack --progress json c -o c.tar.zst >/dev/null 2>p-pk.json || fail "pack"
check_json p-pk.json hash compress
complete p-pk.json
tq-verify check --progress json c.tar.zst >/dev/null 2>p-ck.json || fail "check"
check_json p-ck.json check
complete p-ck.json
tq-verify unpack --progress json c.tar.zst -o u >/dev/null 2>p-up.json || fail "unpack"
check_json p-up.json unpack
complete p-up.json
# pack and unpack in the other modes: plain lines under CI=true, a bar on --progress tty
CI=true tq-verify pack c -o c2.tar.zst >/dev/null 2>pk-plain.err || fail "pack under CI"
grep -q "^tq-verify: compress: done, .* in [0-9.]* s (.*/s)$" pk-plain.err || fail "pack CI=true: $(cat pk-plain.err)"
CI=true tq-verify unpack --quiet c.tar.zst -o u2 2>up-quiet.err || fail "unpack --quiet under CI"
[ ! -s up-quiet.err ] || fail "unpack --quiet printed progress: $(cat up-quiet.err)"
CI=true tq-verify unpack c.tar.zst -o u3 >/dev/null 2>up-plain.err || fail "unpack under CI"
grep -q "^tq-verify: unpack: done, .* in [0-9.]* s (.*/s)$" up-plain.err || fail "unpack CI=true: $(cat up-plain.err)"
tq-verify unpack --progress tty c.tar.zst -o u4 >/dev/null 2>up-tty.err || fail "unpack --progress tty"
grep -q "unpack: \[[#.]*\] .*/s ETA " up-tty.err || fail "unpack tty: $(od -c up-tty.err | head)"
tq-verify pack --progress tty c -o c3.tar.zst >/dev/null 2>pk-tty.err || fail "pack --progress tty"
grep -q "compress: \[[#.]*\] .*/s ETA " pk-tty.err || fail "pack tty: $(od -c pk-tty.err | head)"
CI=true tq-verify unpack --json c.tar.zst -o u5 >up.json 2>up-json.err || fail "unpack --json under CI"
python3 -c 'import json,sys; json.load(open("up.json"))' || fail "unpack --json report"
[ ! -s up-json.err ] || fail "unpack --json: progress on by default: $(cat up-json.err)"
tq-verify ls --read --progress json c >/dev/null 2>p-ls.err || fail "ls --read"
grep '^{' p-ls.err >p-ls.json
check_json p-ls.json read
complete p-ls.json
# A JSON report on stdout stays JSON with --progress json on stderr.
tq-convert --json --progress json m c2 >report.json 2>p-cv2.json || fail "convert --json"
python3 -c 'import json,sys; json.load(open("report.json"))' || fail "convert --json report"
check_json p-cv2.json quantize
# CI=true: plain lines, one at least per phase end; no CI, no terminal: nothing.
CI=true tq-convert m c3 >/dev/null 2>plain.err || fail "convert under CI"
grep -q "^tq-convert: quantize: done, .* in [0-9.]* s (.*/s)$" plain.err || fail "CI=true: $(cat plain.err)"
# plain lines come every 10 s, the first 10 s into a phase: a phase this short prints only
# its "done" line, never a "0.0% (0 B of ...) ETA --:--" line (issue 32)
CI=true tq-split c s9 >/dev/null 2>split-plain.err || fail "split under CI"
for f in plain.err split-plain.err pk-plain.err up-plain.err; do
  ! grep -v ': done, ' $f || fail "$f: a plain progress line before the phase's end"
done
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
