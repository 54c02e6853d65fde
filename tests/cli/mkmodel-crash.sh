# tq-mkmodel killed with SIGKILL mid-run: no file under a final weight name is incomplete,
# leftovers are identifiable partial files, and a re-run into the same directory (--force: it is not empty) gives the
# bytes of an uninterrupted run.
set -u
. "$ROOT/tests/lib/common.sh"
args="--arch qwen3_moe --hidden 256 --moe-intermediate 256 --experts 16 --layers 4 --vocab 1024 --seed 5 --quiet"
tq-mkmodel $args --threads 2 ref || fail "reference run"
for delay in 0.05 0.2 0.5; do
  rm -rf out
  tq-mkmodel $args --threads 2 out & pid=$!
  sleep "$delay"; kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ -d out ]; then
    for f in out/*; do
      [ -e "$f" ] || continue
      case "$f" in
        *.partial-*) ;;
        out/config.json|out/tokenizer.json|out/tokenizer_config.json) ;;
        out/model.safetensors|out/tq-provenance.json) cmp -s "$f" "ref/${f#out/}" || fail "incomplete $f after kill at ${delay}s" ;;
        *) fail "unexpected $f after kill at ${delay}s" ;;
      esac
    done
  fi
  # out holds what the killed run left: replacing it takes --force (the one rule of every tool)
  tq-mkmodel $args --threads 3 --force out || fail "re-run after kill at ${delay}s"
  [ "$(ls out)" = "$(ls ref)" ] || fail "re-run lists $(ls out | tr '\n' ' ')"
  for f in ref/*; do cmp -s "$f" "out/$(basename "$f")" || fail "re-run: $(basename "$f") differs"; done
done
echo ok
