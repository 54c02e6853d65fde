# SIGINT and SIGTERM at several points of each writing tool (mkmodel, convert, split, join,
# pack): the tool removes its partial output, says so in one line and exits 130 or 143;
# nothing is left under the output's name or as OUT.partial-*. The tool is stopped at a
# point of its writing (TQ_PAUSE_AFTER_BYTES), signalled, and continued.
. "$ROOT/tests/lib/safety.sh"
make_dfl # ./dfl CMD...: CMD with SIGINT at its default
run tq-mkmodel --quiet --seed 9 --layers 4 m
run tq-convert --quiet m c
run tq-split --quiet c s
n=0
interrupt() { # SIGNAL STATUS AFTER_BYTES OUT CMD...
  local sig=$1 want=$2 at=$3 out=$4 rc
  shift 4
  rm -rf "$out"
  PAUSE_ERR=$PWD/int.err pause_at "$at" ./dfl "$@" || fail "$*: finished before $at bytes"
  [ -n "$(partials "$out")" ] || fail "$*: no partial output at $at bytes"
  kill -s "$sig" "$PID"
  kill -CONT "$PID"
  wait "$PID"; rc=$?
  [ "$rc" -eq "$want" ] || fail "$* (SIG$sig at $at bytes): exit $rc, expected $want ($(cat int.err))"
  [ -z "$(partials "$out")" ] || fail "$* (SIG$sig at $at bytes): left $(partials "$out")"
  [ ! -e "$out" ] || fail "$* (SIG$sig at $at bytes): $out was published"
  grep -qx "${1##*/}: interrupted by SIG$sig; the partial output was removed" int.err ||
    fail "$* (SIG$sig): message $(cat int.err)"
  n=$((n + 1))
}
for at in 1 200000 900000; do
  for sig in INT:130 TERM:143; do
    s=${sig%:*} st=${sig#*:}
    interrupt "$s" "$st" "$at" m2 tq-mkmodel --quiet --seed 9 --layers 4 m2
    interrupt "$s" "$st" "$at" c2 tq-convert --quiet m c2
    interrupt "$s" "$st" "$at" s2 tq-split --quiet c s2
    interrupt "$s" "$st" "$at" j2 tq-split --quiet --join s j2
    interrupt "$s" "$st" "$at" c.tar.zst tq-verify pack --quiet c -o c.tar.zst
  done
done
# The other writing tools, the same way: tq-rowlayout's row file, tq-run's --logits file and
# tq-verify sign's model.sig (each small enough that one early pause point is what there is).
run tq-mkmodel --arch ngram --quiet t
. "$ROOT/tests/lib/keys.sh"
make_key k prime256v1
run tq-verify manifest --quiet c
for sig in INT:130 TERM:143; do
  s=${sig%:*} st=${sig#*:}
  interrupt "$s" "$st" 1 t.rows tq-rowlayout t/model.safetensors --out t.rows
  interrupt "$s" "$st" 100000 t.rows tq-rowlayout t/model.safetensors --out t.rows
  interrupt "$s" "$st" 1 l.f32 tq-run m --tokens 1,2,3 --max-tokens 4 --logits l.f32
  interrupt "$s" "$st" 1 c/model.sig tq-verify sign --quiet c --key k.pem
done
# tq-verify manifest (SHA256SUMS and tq-manifest.json) and tq-rowlayout --extract into a
# directory it makes: the directory goes too.
run tq-rowlayout --quiet t/model.safetensors --out t.rows
cp -r c cm && rm -f cm/SHA256SUMS cm/tq-manifest.json
for sig in INT:130 TERM:143; do
  s=${sig%:*} st=${sig#*:}
  PARTIAL_GLOB='cm/SHA256SUMS.partial-* cm/tq-manifest.json.partial-*' \
    interrupt "$s" "$st" 1 cm/SHA256SUMS tq-verify manifest --quiet cm
  [ ! -e cm/tq-manifest.json ] || fail "manifest SIG$s: tq-manifest.json published"
  PARTIAL_GLOB='ex/model.safetensors.partial-*' interrupt "$s" "$st" 1 ex tq-rowlayout --quiet --extract t.rows --to ex
  mkdir -p ex2
  PARTIAL_GLOB='ex2/model.safetensors.partial-*' interrupt "$s" "$st" 1 ex2/model.safetensors tq-rowlayout --quiet --extract t.rows --to ex2
  [ -d ex2 ] || fail "--extract SIG$s: removed the directory it was given"
  rmdir ex2
done
# An ignored SIGINT (a background job's, nohup-style) stays ignored: the run finishes.
tq-convert --quiet m c3 & p=$!
for ((i = 0; i < 500; i++)); do # until the job runs tq-convert (its SIGINT is ignored by then)
  grep -q tq-convert "/proc/$p/cmdline" 2>/dev/null && break
  sleep 0.01
done
kill -INT $p
wait $p || fail "ignored SIGINT stopped the run"
[ -d c3 ] || fail "ignored SIGINT: no output"
echo "interrupted $n runs: exit 130/143, no partial output left"
