# tq-run --backend: without Metal in the build, metal is a usage error (exit 2) whose message
# says so; shim (runtime/metal/'s kernels on this CPU) generates the CPU backend's tokens, with
# logits within a relative 1e-4 (--compare-logits), on a dense and a streamed MoE model. Where
# the build has Metal, metal must do the same within a relative 1e-3 (never run: no Mac was
# available; docs/metal.md); with TQ_REQUIRE_METAL set (make check-metal) a build without it fails.
# --json reports the device backend's counters (gpu_*: docs/metal.md, Counters) with shim and
# metal and not with cpu; their ceilings per fixture are test_metal_decode's. --map-experts
# decodes the streamed MoE with one wait per token.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch llama --size tiny --seed 3 dense
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 4 moe
run tq-convert --quiet moe moe-tq
run tq-split --quiet moe-tq moe-split
backends="shim"
if tq-run dense --tokens 1 --max-tokens 1 --backend metal >/dev/null 2>err; then
  echo "this build has Metal: --backend metal ran"
  backends="shim metal"
else
  [ -z "${TQ_REQUIRE_METAL:-}" ] || fail "TQ_REQUIRE_METAL is set, but --backend metal failed: $(cat err)"
  expect_msg 2 "no Metal backend" tq-run dense --tokens 1 --backend metal
fi
vocab() { sed -n '/"vocab_size": *[0-9]/{s/.*"vocab_size": *\([0-9]*\).*/\1/p;q;}' "$1/config.json"; }
for m in dense moe-split; do
  run tq-run --quiet "$m" --tokens 5,9,2,7 --max-tokens 12 --cache-budget 64K --force --logits cpu.f32 > cpu.tok
  v=$(vocab "$m")
  [ -n "$v" ] || fail "$m: no vocab_size in config.json"
  for b in $backends; do
    lim=1e-4
    [ "$b" = metal ] && lim=1e-3
    run tq-run --quiet "$m" --tokens 5,9,2,7 --max-tokens 12 --cache-budget 64K --force --logits $b.f32 --backend $b > $b.tok
    cmp -s cpu.tok $b.tok || fail "$m: --backend $b generated $(cat $b.tok), cpu $(cat cpu.tok)"
    run tq-run --compare-logits cpu.f32 $b.f32 --vocab "$v" --json > cmp.json
    rel=$(jget cmp.json max_rel_diff)
    top=$(jget cmp.json top1_rate)
    echo "$m: $b vs cpu max relative logit difference $rel, top-1 agreement $top"
    awk -v r="$rel" -v l=$lim 'BEGIN { exit !(r < l) }' || fail "$m: $b: relative difference $rel (limit $lim)"
    [ "$top" = 1 ] || fail "$m: $b: top-1 agreement $top"
  done
done

# The counters in tq-run --json: present with a device backend, absent with the CPU's
for b in $backends; do
  run tq-run dense --tokens 5,9,2,7 --max-tokens 4 --backend $b --json > $b.json
  for k in gpu_dispatches_per_token gpu_waits_per_token gpu_staged_bytes_per_token gpu_staged_weight_bytes_per_token \
           gpu_wrap_copies gpu_wrap_copy_bytes; do
    [ -n "$(jget $b.json $k)" ] || fail "--backend $b --json has no $k"
  done
  # a resident dense model: one wait per token (the logits), no weight staged or copied
  [ "$(jget $b.json gpu_waits_per_token)" = 1 ] || fail "dense, $b: $(jget $b.json gpu_waits_per_token) waits per token"
  [ "$(jget $b.json gpu_staged_weight_bytes_per_token)" = 0 ] && [ "$(jget $b.json gpu_wrap_copies)" = 0 ] ||
    fail "dense, $b: weights staged or copied: $(cat $b.json)"
  [ "$(jget $b.json gpu_dispatches_per_token)" -gt 0 ] || fail "dense, $b: no dispatches counted"
  run tq-run moe-split --tokens 5,9,2,7 --max-tokens 4 --cache-budget 64K --backend $b --json > $b-moe.json
  # streamed: the blocks are read into device memory the cache owns, so nothing is staged
  [ "$(jget $b-moe.json gpu_staged_bytes_per_token)" = 0 ] || fail "streamed MoE, $b: $(jget $b-moe.json gpu_staged_bytes_per_token) bytes staged per token"
  [ "$(jget $b-moe.json expert_misses)" -gt 0 ] || fail "streamed MoE, $b: no expert read"
  echo "dense, $b: $(jget $b.json gpu_dispatches_per_token) dispatches and $(jget $b.json gpu_waits_per_token) waits per token; streamed MoE: $(jget $b-moe.json gpu_waits_per_token) waits, $(jget $b-moe.json gpu_staged_bytes_per_token) bytes staged per token"
done
run tq-run dense --tokens 5,9,2,7 --max-tokens 4 --json > cpu.json
grep -q '"gpu_' cpu.json && fail "--backend cpu --json reports device counters"

# --map-experts: the layer files mapped, the experts found by id (on the device: no wait per
# MoE layer, docs/metal.md, Mapped experts). The CPU's logits are the bytes it gets reading;
# a device backend's within the limit above, with one wait per token and no byte staged or
# region copied (the mapping is whole 16 KiB pages)
run tq-run --quiet moe-split --tokens 5,9,2,7 --max-tokens 12 --cache-budget 64K --force --logits cpu.f32 > cpu.tok
run tq-run --quiet moe-split --tokens 5,9,2,7 --max-tokens 12 --map-experts --force --logits cpu-map.f32 > cpu-map.tok
cmp -s cpu.f32 cpu-map.f32 || fail "--map-experts: the CPU's logits differ from reading the experts"
run tq-run moe-split --tokens 5,9,2,7 --max-tokens 4 --map-experts > /dev/null 2> map.err
grep -q '^experts: mapped from the layer files' map.err || fail "--map-experts: the report says $(grep experts: map.err)"
v=$(vocab moe-split)
for b in $backends; do
  lim=1e-4
  [ "$b" = metal ] && lim=1e-3
  run tq-run --quiet moe-split --tokens 5,9,2,7 --max-tokens 12 --map-experts --backend $b --force --logits $b-map.f32 > $b-map.tok
  cmp -s cpu.tok $b-map.tok || fail "--map-experts: --backend $b generated $(cat $b-map.tok), cpu $(cat cpu.tok)"
  run tq-run --compare-logits cpu.f32 $b-map.f32 --vocab "$v" --json > cmp.json
  rel=$(jget cmp.json max_rel_diff)
  awk -v r="$rel" -v l=$lim 'BEGIN { exit !(r < l) }' || fail "--map-experts, $b: relative difference $rel (limit $lim)"
  run tq-run moe-split --tokens 5,9,2,7 --max-tokens 4 --map-experts --backend $b --json > $b-map.json
  [ "$(jget $b-map.json io)" = map ] && [ "$(jget $b-map.json streamed)" = true ] && [ "$(jget $b-map.json expert_misses)" = 0 ] ||
    fail "--map-experts, $b: $(cat $b-map.json)"
  [ "$(jget $b-map.json gpu_waits_per_token)" = 1 ] || fail "--map-experts, $b: $(jget $b-map.json gpu_waits_per_token) waits per token"
  [ "$(jget $b-map.json gpu_staged_bytes_per_token)" = 0 ] && [ "$(jget $b-map.json gpu_wrap_copies)" = 0 ] ||
    fail "--map-experts, $b: bytes staged or regions copied: $(cat $b-map.json)"
  echo "streamed MoE, $b: $(jget $b-moe.json gpu_waits_per_token) waits per token read, $(jget $b-map.json gpu_waits_per_token) mapped (max relative logit difference $rel)"
done
# a split aligned to 4 KiB: its data_start (4096) is an offset inside the mapping, which starts on
# a 16 KiB page anyway and is rounded up to whole 16 KiB pages past the file's end (the tail
# never read), so it is still wrapped in place
run tq-split --quiet --align 4096 moe-tq moe-split4k
size=$(wc -c < moe-split4k/experts/layer_00.bin)
echo "a 4 KiB-aligned layer file of $size bytes ($((size % 16384)) past a 16 KiB page)"
run tq-run --quiet moe-split4k --tokens 5,9,2,7 --max-tokens 12 --map-experts --backend shim > shim-map4k.tok
cmp -s cpu.tok shim-map4k.tok || fail "--map-experts, 4 KiB split: generated $(cat shim-map4k.tok), cpu $(cat cpu.tok)"
run tq-run moe-split4k --tokens 5,9,2,7 --max-tokens 4 --map-experts --backend shim --json > map4k.json
[ "$(jget map4k.json gpu_waits_per_token)" = 1 ] && [ "$(jget map4k.json gpu_wrap_copies)" = 0 ] &&
  [ "$(jget map4k.json gpu_staged_bytes_per_token)" = 0 ] || fail "--map-experts, 4 KiB split: $(cat map4k.json)"
expect_msg 2 "--map-experts and --resident" tq-run moe-split --tokens 1 --map-experts --resident
expect_msg 2 "not --map-experts" tq-run moe-split --tokens 1 --map-experts --cache-budget 1M
exit 0
