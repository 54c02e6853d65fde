# tq-mkmodel: usage errors exit 2, a non-empty output directory exits 1 and is left alone
# (with --force an earlier tq-mkmodel output is replaced, anything else still refused).
set -u
. "$ROOT/tests/lib/common.sh"
expect() { expect_msg "$1" "$2" tq-mkmodel "${@:3}"; } # expect STATUS MESSAGE-SUBSTRING ARGS...
expect 2 "missing OUTPUT_DIR"
expect 2 "invalid value 'gpt2' for --arch (expected llama, qwen2, qwen3, qwen2_moe, qwen3_moe, qwen3_next, qwen3_5, qwen3_5_moe, mixtral, deepseek_v3, kimi_k2, gpt_oss, gemma4 or ngram)" --arch gpt2 o
expect 2 "invalid value 'big' for --size (expected tiny or 8g)" --size big o
expect 2 "invalid value 'x' for --layers" --layers x o
expect 2 "invalid value 'int8' for --dtype (expected bf16, f16 or f32)" --dtype int8 o
expect 2 "top-k" --experts 4 --top-k 5 o
expect 2 "kv-heads" --heads 4 --kv-heads 3 o
expect 2 "--naming mlx only applies" --arch llama --naming mlx o
expect 2 "invalid value 'affine3' for --quant (expected affine4 or affine8)" --quant affine3 o
expect 2 "not a multiple of --group-size" --arch ngram --width 100 o
expect 2 "unknown option" --frobnicate o
expect 2 "too many arguments" a b
[ ! -e o ] || fail "a usage error created the output directory"
mkdir full && echo keep > full/file
expect 1 "full: exists and is not empty (use --force to replace it)" full
expect 1 "holds 'file', which tq-mkmodel does not write" --force full
[ "$(cat full/file)" = keep ] && [ "$(ls full)" = file ] || fail "non-empty directory was modified"
# an earlier output: refused without --force, replaced whole with it
tq-mkmodel --quiet --arch ngram --seed 1 again || fail "first run"
cp again/model.safetensors first.st
expect 1 "again: exists and is not empty (use --force to replace it)" --quiet --arch ngram --seed 2 again
cmp -s first.st again/model.safetensors || fail "a refused run changed the earlier output"
tq-mkmodel --quiet --force --arch ngram --seed 2 again || fail "--force run"
! cmp -s first.st again/model.safetensors || fail "--force did not replace the earlier output"
tq-mkmodel --help | grep -q "Usage: tq-mkmodel" || fail "--help"
tq-mkmodel --version | grep -q "^tq-mkmodel (tq) " || fail "--version"
tq-mkmodel --json --quiet --arch llama j > report.json 2>err || fail "--json run failed"
[ ! -s err ] || fail "stderr not empty with --quiet: $(cat err)"
grep -q '"tensors": 21' report.json || fail "json report: $(cat report.json)"
# explicit dimensions override the preset wherever --size stands
tq-mkmodel --layers 1 --hidden 64 --intermediate 96 --moe-intermediate 32 --experts 3 --top-k 1 \
  --heads 2 --kv-heads 1 --head-dim 16 --vocab 100 --size 8g --quiet ov || fail "override run"
sed 's/,$//' ov/config.json > cfg
for kv in '"num_hidden_layers": 1' '"hidden_size": 64' '"intermediate_size": 96' \
          '"moe_intermediate_size": 32' '"num_experts": 3' '"num_experts_per_tok": 1' \
          '"num_attention_heads": 2' '"num_key_value_heads": 1' '"head_dim": 16' '"vocab_size": 100'; do
  grep -qxF "  $kv" cfg || fail "config.json lacks $kv"
done
[ "$(wc -c < ov/model.safetensors)" -lt 200000 ] || fail "the 8g preset was not overridden"
# a write failure (file size limit, as on a full disk) exits 1 and leaves no weight file
(ulimit -f 1000; tq-mkmodel --quiet small) 2>err; rc=$?
[ "$rc" = 1 ] || fail "write failure: exit $rc"
grep -q "File too large" err || fail "write failure message: $(cat err)"
[ -z "$(ls small)" ] || fail "write failure left files: $(ls small)"
echo ok
