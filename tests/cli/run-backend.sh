# tq-run --backend: without Metal in the build, metal is a usage error (exit 2) whose message
# says so; shim (runtime/metal/'s kernels on this CPU) generates the CPU backend's tokens, with
# logits within a relative 1e-4 (--compare-logits), on a dense and a streamed MoE model.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch llama --size tiny --seed 3 dense
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 4 moe
run tq-convert --quiet moe moe-tq
run tq-split --quiet moe-tq moe-split
if tq-run dense --tokens 1 --max-tokens 1 --backend metal >/dev/null 2>err; then
  echo "this build has Metal: --backend metal ran"
else
  expect_msg 2 "no Metal backend" tq-run dense --tokens 1 --backend metal
fi
vocab() { sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$1/config.json" | head -n1; }
for m in dense moe-split; do
  run tq-run --quiet "$m" --tokens 5,9,2,7 --max-tokens 12 --cache-budget 64K --logits cpu.f32 > cpu.tok
  run tq-run --quiet "$m" --tokens 5,9,2,7 --max-tokens 12 --cache-budget 64K --logits shim.f32 --backend shim > shim.tok
  cmp -s cpu.tok shim.tok || fail "$m: --backend shim generated $(cat shim.tok), cpu $(cat cpu.tok)"
  v=$(vocab "$m")
  [ -n "$v" ] || fail "$m: no vocab_size in config.json"
  run tq-run --compare-logits cpu.f32 shim.f32 --vocab "$v" --json > cmp.json
  rel=$(jget cmp.json max_rel_diff)
  top=$(jget cmp.json top1_rate)
  echo "$m: shim vs cpu max relative logit difference $rel, top-1 agreement $top"
  awk -v r="$rel" 'BEGIN { exit !(r < 1e-4) }' || fail "$m: relative difference $rel"
  [ "$top" = 1 ] || fail "$m: top-1 agreement $top"
done
