# Names with control characters never reach the terminal raw: every tool, on a model
# directory whose own name and whose files' names hold a newline, a carriage return, ESC
# sequences and BEL, prints them escaped (\xNN, tq_sb_escaped, the rule tq-verify ls already
# had), so a name cannot forge an "OK: all good" line or move the cursor. The check reads
# every run's stdout and stderr: no byte below 0x20 but newline (and tab, which ls puts
# between its columns; a tab in a name is escaped), and no line that a name started. (Consistency test: the rule is tq's own, man tq-verify(1).)
set -u
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/keys.sh"
make_key k prime256v1
EVIL=$'\nOK: all good\r\x1b[2J\x1b]0;title\x07'
D="m${EVIL}"
tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 3 "$D" || fail "tq-mkmodel"
n=0
out() { # out CMD ARGS...: run it, keep its stdout and stderr (its status does not matter here)
  n=$((n + 1))
  printf '%s\n' "$*" > "cmd.$n"
  "$@" > "o.$n" 2>&1 < /dev/null
  echo $? >> "cmd.$n"
}
out tq-mkmodel --arch llama --size tiny "x${EVIL}"
out tq-verify ls "$D"
out tq-verify manifest "$D"
out tq-verify check "$D"
out tq-verify compare "$D" "$D"
out tq-verify quality "$D" "$D"
out tq-verify provenance "$D"
out tq-verify golden "$D" --golden "g${EVIL}.json" --update --tokens 1,2
out tq-verify golden "$D" --golden "g${EVIL}.json"
out tq-verify sign "$D" --key k.pem --out "sig${EVIL}"
out tq-verify verify "$D" --pubkey k.pub --sig "sig${EVIL}"
out tq-verify pack "$D" -o "b${EVIL}.tar.zst"
out tq-verify check "b${EVIL}.tar.zst"
out tq-verify unpack "b${EVIL}.tar.zst" -o "u${EVIL}"
out tq-run "$D" --tokens 1,2 --max-tokens 2
out tq-run "$D" --tokens 1,2 --max-tokens 2 --logits "l${EVIL}"
out tq-convert "$D" "q${EVIL}"
out tq-convert --dry-run "$D" "q2${EVIL}"
out tq-split "$D" "s${EVIL}"
out tq-split --dry-run "$D" "s2${EVIL}"
out tq-split --join "s${EVIL}" "j${EVIL}"
out tq-run "s${EVIL}" --tokens 1,2 --max-tokens 2
out tq-rowlayout "$D/model.safetensors" --out "r${EVIL}.rows"
# a bundle with an entry of such a name (check reports it as a refused entry, naming it)
zstd -q -d -c "b${EVIL}.tar.zst" > plain.tar || fail "zstd -d"
python3 - "$EVIL" <<'PY' || fail "cannot write evil.tar"
import io, sys, tarfile
src = tarfile.open("plain.tar")
with tarfile.open("evil.tar", "w", format=tarfile.PAX_FORMAT) as out:
    for m in src.getmembers():
        out.addfile(m, src.extractfile(m))
    ti = tarfile.TarInfo("e" + sys.argv[1])
    ti.size = 2
    out.addfile(ti, io.BytesIO(b"x\n"))
PY
zstd -q -f evil.tar -o evil.tar.zst || fail "zstd"
out tq-verify check evil.tar.zst
out tq-verify unpack evil.tar.zst -o "u2${EVIL}"
# files with such names inside the directories: extra files, refused manifests and bundles
echo x > "$D/f${EVIL}"
echo x > "s${EVIL}/f${EVIL}"
out tq-verify check "$D"
out tq-verify check "s${EVIL}"
out tq-verify verify "$D" --pubkey k.pub --sig "sig${EVIL}"
out tq-verify manifest "$D"
out tq-verify sign "$D" --key k.pem --out "sig2${EVIL}"
out tq-verify pack "$D" -o "b2${EVIL}.tar.zst"
out tq-verify compare "$D" "s${EVIL}"
out tq-run "s${EVIL}" --tokens 1,2 --max-tokens 2
cp "$D/model.safetensors" "$D/g${EVIL}.safetensors"
out tq-verify ls "$D"
out tq-verify compare "$D" "s${EVIL}"
out tq-convert "$D" "q3${EVIL}"
# the names did reach the outputs (so the check below checks something)
cat o.* | grep -q 'm\\x0aOK: all good\\x0d\\x1b\[2J\\x1b\]0;title\\x07' || fail "no escaped name in any output"
python3 - "$n" <<'EOF' || exit 1
import sys
bad = 0
for i in range(1, int(sys.argv[1]) + 1):
    data = open("o.%d" % i, "rb").read()
    cmd = open("cmd.%d" % i, "rb").read().decode("utf-8", "replace")
    raw = sorted({b for b in data if (b < 0x20 and b not in (0x09, 0x0a)) or b == 0x7f})
    forged = [l for l in data.split(b"\n") if l.startswith(b"OK: all good")]
    if raw or forged:
        bad += 1
        print("FAIL: %r: raw bytes %s%s\n%r" % (cmd, ["0x%02x" % b for b in raw], " and a forged line" if forged else "",
                                               data[:600]), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
exit 0
