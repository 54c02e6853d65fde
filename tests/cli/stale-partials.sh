# A run killed before its end (SIGKILL: nothing can clean up) leaves OUT.partial-XXXXXX, tens
# of GB on a real model; the next run into the same OUT names it and its size on disk in one
# note on stderr and removes nothing (issue 32: it was never mentioned). Partials of other
# outputs and OUT.partial-resume (its own note) are not listed; a clean run says nothing.
. "$ROOT/tests/lib/safety.sh"
run tq-mkmodel --quiet --seed 5 m
# a real partial: tq-convert stopped mid-read (TQ_PAUSE_AFTER_BYTES), then SIGKILLed
pause_at 500000 tq-convert --quiet m c || fail "tq-convert did not pause"
kill -KILL "$PID"; wait "$PID" 2>/dev/null
p=$(ls -d c.partial-*) && [ -d "$p" ] || fail "no partial left by the killed run"
mkdir other.partial-Zz9Zz9 c2.partial-Ab12Cd   # another output's partials
tq-convert --quiet m c 2>err || fail "rerun: $(cat err)"
size=$(du -B1 -s "$p" | cut -f1) # st_blocks x 512, as tq counts it
human=$(python3 -c "import sys; n=int(sys.argv[1]); print(next(f'{n/1024**k:.2f} {u}' for k,u in ((3,'GiB'),(2,'MiB'),(1,'KiB')) if n>=1024**k) if n>=1024 else f'{n} B')" "$size")
[ "$(cat err)" = "tq-convert: note: a partial output left by a run killed before its end (or still running), not removed: $p ($human)" ] ||
  fail "note: $(cat err) (expected $p, $human)"
[ -d "$p" ] || fail "the partial was removed"
# two of them, with their total (OUT.partial-resume has its own note, not this one); through
# tq-split, tq-rowlayout, pack too
mkdir s.partial-aaaaaa s.partial-bbbbbb s.partial-resume && head -c 5000 /dev/zero > s.partial-bbbbbb/x
tq-split --quiet c s 2>err || fail "split: $(cat err)"
grep -qx "tq-split: note: partial outputs left by runs killed before their end (or still running), not removed: s.partial-aaaaaa ([0-9.]* [KMG]*i*B), s.partial-bbbbbb ([0-9.]* [KMG]*i*B); [0-9.]* [KMG]*i*B in all" err ||
  fail "split note: $(cat err)"
run tq-mkmodel --quiet --arch ngram ng
: > r.rows.partial-cccccc
tq-rowlayout --quiet ng/model.safetensors --out r.rows 2>err || fail "rowlayout: $(cat err)"
grep -q "^tq-rowlayout: note: a partial output .*: r.rows.partial-cccccc (0 B)$" err || fail "rowlayout note: $(cat err)"
: > b.tar.zst.partial-dddddd
tq-verify pack --quiet c -o b.tar.zst 2>err || fail "pack: $(cat err)"
grep -q "^tq-verify: note: a partial output .*: b.tar.zst.partial-dddddd (0 B)$" err || fail "pack note: $(cat err)"
# nothing to say: nothing said
tq-convert --quiet m c3 2>err && [ ! -s err ] || fail "a clean run printed: $(cat err)"
ls -d c.partial-* other.partial-Zz9Zz9 c2.partial-Ab12Cd s.partial-aaaaaa >/dev/null || fail "a partial was removed"
echo "the killed run's $p ($human) named by the next run"
