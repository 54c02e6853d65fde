# "Did you mean": an unknown option or choice value gets the option tq takes instead. The
# spellings users of mlx_lm.convert (mlx_lm/convert.py: --q-bits, --q-group-size, --q-mode,
# --hf-path, --mlx-path, -q), llama.cpp (convert_hf_to_gguf.py: --outtype, --outfile;
# llama-cli: -m, -p, -n, --n-predict) and transformers (--max-new-tokens) bring come from each
# tool's hint table (cmd/cli.h tq_opt_hint, beside its option table); a typo gets the nearest
# option or choice by edit distance. Exit 2 with the hint, nothing written. The messages are
# pinned in did-you-mean.stdout.exact (consistency with the tables, read line by line; the
# foreign spellings were read from those programs' argument parsers, not run here).
. "$ROOT/tests/lib/common.sh"
t() { expect_exit 2 "$@"; [ ! -e out-dir ] || fail "$*: wrote out-dir"; }
for a in "--q-bits 4" "--q-group-size 64" "--q-mode affine" "--outtype f16" "--outfile x" "--hf-path m" \
  "--mlx-path o" "--quantize" "-q" "--method mlx" "--dtype float16" "--bist 3" "--group_size 64" "--jsn" \
  "--scale rsm" "--method turbo" "--frobnicate"; do
  t tq-convert $a m out-dir
done
for a in "-m m" "-n 5" "--n-predict 5" "-p hi" "--max-new-tokens 3" "--temprature 1" "--backend gpu"; do
  t tq-run $a m
done
t tq-split --dryrun m out-dir
t tq-split --target maccode m out-dir
t tq-verify check --jsn x
t tq-verify chek x
t tq-verify sing x
t tq-mkmodel --arch lama out-dir
