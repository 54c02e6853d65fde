#!/usr/bin/env bash
# Quantization quality on the trained test models (testdata/models: qwen3-tiny, qwen3-moe-tiny;
# trained weights, not synthetic): for bf16 and for tq-convert at 2, 3 and 4 bits (group 64,
# --scale rms and lsq, each with --codebook gaussian and fitted), tq-convert's byte budget
# (--target-bpw 2.5, 3.5 and 4.5, lsq, gaussian and fitted codebooks) and MLX affine 4 and 8
# bits, measured by tq-verify quality against the bf16 model: the held-out perplexity (the runtime's sliding-window evaluation, tq-run --eval's;
# window 128 = the training context, stride 64), mean KL(bf16 || quantized) and top-1 agreement
# with bf16 over every scored token, and the relative MSE of the tensors that differ from
# bf16; the bits per quantized weight from tq-convert. Prints one markdown table per model.
# With TQ_GGML_SRC=a ggml checkout (ggml-org/ggml; not part of tq, never vendored: without it these
# rows are skipped with a message), also llama.cpp's formats on the same tensors, quantized by
# ggml's own code (bench/kquant/kquant.py, needs Debian python3-numpy; no importance matrix),
# dequantized to f32 and decoded by the same tq-run: the pure types q2_K, q3_K, q4_K, iq3_s and
# iq4_xs (llama-quantize --pure) and the mixes llama-quantize makes for the file types Q2_K,
# Q3_K_M, Q4_K_M, IQ3_S and IQ4_XS (its per-tensor type rules, ported in kquant.py); tensors
# whose rows are not whole blocks of their type (qwen3-moe-tiny's 128-wide expert down_proj)
# get llama.cpp's fallback type, as llama-quantize does. TQ_QUALITY_LLAMA picks them (default
# all ten). After them, for each llama.cpp row's bits/weight, a tq-convert --target-bpw row at
# those bits (named tq-bpw-at-ROW; tq's largest budget where the llama.cpp row has more bits than
# tq can spend: tq-bpw-at-max), so every anchor has a tq budget at equal bits per weight beside it.
# TQ_QUALITY_MODELS (default "qwen3-tiny qwen3-moe-tiny"), TQ_QUALITY_BYTES (default all of
# the evaluation text) to measure on its first N bytes, TQ_QUALITY_CONFIGS to pick rows by
# name (a regex). After each table, what tq-convert chose for the fitted and budget rows: the
# (bits, group size) mix and on how many modules the fitted codebook was kept (tq-convert
# keeps a module's fitted codebook only where it beats the Gaussian one).
# Claims beyond noise (issue 36): TQ_QUALITY_SEEDS (default "42 1 2") converts every tq row at
# each rotation seed (tq-convert --seed); the table gives the first seed's figures, the token-
# level standard error of its KL (and of its perplexity change, from the paired per-token NLL
# difference), and the min..max over the seeds of the perplexity change and the KL (affine
# and llama.cpp rows have no rotation and no seed: one run). Every tq row also gets the noise baseline at
# the first seed (tq-verify quality --noise: REF plus iid Gaussian noise of that row's error
# energy in each tensor); TQ_QUALITY_NOISE=0 leaves it out.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs quality tq-convert tq-run tq-verify
W=128 S=64
jget1() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
D=$TQ_BENCH_DIR/quality
rm -rf "$D" && mkdir -p "$D"
EVAL=$D/eval.txt
if [ -n "${TQ_QUALITY_BYTES:-}" ]; then
  head -c "$TQ_QUALITY_BYTES" "$ROOT/testdata/models/eval/python-doc-eval.txt" > "$EVAL"
else
  cp "$ROOT/testdata/models/eval/python-doc-eval.txt" "$EVAL"
fi
# NAME:tq-convert options; by width, each fixed width followed by the budget just above it
CONFIGS=()
for b in 2 3 4; do
  for cb in gaussian fitted; do
    sfx=; [ $cb = fitted ] && sfx=-fitted
    CONFIGS+=("tq-$b-rms$sfx:--bits $b --scale rms --codebook $cb" "tq-$b-lsq$sfx:--bits $b --scale lsq --codebook $cb")
  done
  for cb in gaussian fitted; do
    sfx=; [ $cb = fitted ] && sfx=-fitted
    CONFIGS+=("tq-bpw-$b.5$sfx:--target-bpw $b.5 --scale lsq --codebook $cb")
  done
done
CONFIGS+=("affine-4:--method affine --bits 4 --embed keep" "affine-8:--method affine --bits 8 --embed keep")
LIBQ=
if [ -z "${TQ_GGML_SRC:-}" ]; then
  echo "quality: llama.cpp rows skipped (set TQ_GGML_SRC to a ggml checkout, e.g. ggml-org/ggml 9a4acb37)"
elif [ ! -f "$TQ_GGML_SRC/src/ggml-quants.c" ]; then
  echo "quality: llama.cpp rows skipped ($TQ_GGML_SRC has no src/ggml-quants.c)"
elif ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "quality: llama.cpp rows skipped (bench/kquant/kquant.py needs /usr/bin/python3 with numpy: Debian python3-numpy)"
else
  LIBQ=$D/libggml-quants.so
  cc -O2 -fPIC -shared -w -I"$TQ_GGML_SRC/include" -I"$TQ_GGML_SRC/src" -I"$TQ_GGML_SRC/src/ggml-cpu" \
    -o "$LIBQ" "$TQ_GGML_SRC/src/ggml-quants.c" "$ROOT/bench/kquant/ggml_stubs.c" -lm
  echo "quality: llama.cpp formats by ggml's quantizers from $TQ_GGML_SRC ($(git -C "$TQ_GGML_SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
fi
SEEDS=(${TQ_QUALITY_SEEDS:-42 1 2})
# measure Q [--noise]: tq-verify quality of one model against the bf16 one into Q.quality.json:
# perplexity, KL and top-1 agreement over the same tokens, the relative MSE of every tensor
# that differs from bf16 (dequantized and compared by tq-verify), with --noise the baseline
measure() {
  local Q=$1
  shift
  "$BIN/tq-verify" quality --json "$@" --eval "$EVAL" --window $W --stride $S "$M" "$Q" > "$Q.quality.json"
}
# row NAME BITS/WEIGHT QUALITY_JSON...: one table row; the first report's figures, the spread
# over all of them
row() {
  local name=$1 bpw=$2
  shift 2
  python3 - "$name" "$bpw" "$ref" "$@" <<'PY'
import json, math, sys
name, bpw, ref = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rs = [json.load(open(p)) for p in sys.argv[4:]]
for r in rs:
    if r["eval"]["ref"]["perplexity"] != ref:
        sys.exit("quality: tq-verify's bf16 perplexity %r is not tq-run's %r" % (r["eval"]["ref"]["perplexity"], ref))
r = rs[0]; e = r["eval"]
ppl = e["test"]["perplexity"]
dp = [100 * (x["eval"]["test"]["perplexity"] / ref - 1) for x in rs]
kl = [x["eval"]["mean_kl"] for x in rs]
# perplexity ratio = exp(NLL difference): its standard error, in percent
sp = 100 * ppl / ref * e["nll_diff_stderr"]
spread = lambda v, f: (f + "…" + f) % (min(v), max(v)) if len(v) > 1 else "—"
noise = "—"
if "noise" in e:
    noise = "%.5f (%+.2f%%)" % (e["noise"]["mean_kl"], 100 * (e["noise"]["perplexity"] / ref - 1))
print("| %s | %.3f | %.5f | %.3f | %+.2f%% ± %.2f | %s | %.5f ± %.5f | %s | %.4f | %s |" % (
    name, bpw, r["rel_mse"], ppl, dp[0], sp, spread(dp, "%+.2f%%"), e["mean_kl"], e["kl_stderr"],
    spread(kl, "%.5f"), e["top1_agreement"], noise))
PY
}
# convert_row NAME ARGS...: tq-convert ARGS (at every rotation seed for a tq- row, once for
# affine), measured and printed as one row; budget and fitted rows are remembered in chosen
convert_row() {
  local name=$1 s Qs Q
  shift
  Q=$D/$m-$name
  reports=()
  case $name in
    tq-*)
      for s in "${SEEDS[@]}"; do
        Qs=$Q-s$s
        "$BIN/tq-convert" "$@" --seed "$s" --json --quiet "$M" "$Qs" > "$Qs.convert.json"
        if [ ${#reports[@]} = 0 ] && [ "${TQ_QUALITY_NOISE:-1}" != 0 ]; then measure "$Qs" --noise; else measure "$Qs"; fi
        reports+=("$Qs.quality.json")
        [ ${#reports[@]} = 1 ] || rm -rf "$Qs"
      done
      Q=$Q-s${SEEDS[0]} ;;
    *)
      "$BIN/tq-convert" "$@" --json --quiet "$M" "$Q" > "$Q.convert.json"
      measure "$Q"
      reports=("$Q.quality.json") ;;
  esac
  row "$name" "$(jget "$Q.convert.json" bits_per_weight_quantized)" "${reports[@]}"
  case $name in *-fitted|tq-bpw-*) chosen+=("$name:$Q.convert.json") ;; esac
}
echo "quality: tq at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo " (with uncommitted changes)"), models at $(git -C "$ROOT" log -1 --format=%h -- 'testdata/models/*.safetensors' testdata/models/eval 2>/dev/null || echo '?'), eval text $(wc -c < "$EVAL") bytes, window $W, stride $S, rotation seeds ${SEEDS[*]}; load $(cut -d' ' -f1 /proc/loadavg)"
for m in ${TQ_QUALITY_MODELS:-qwen3-tiny qwen3-moe-tiny}; do
  M=$ROOT/testdata/models/$m
  "$BIN/tq-run" "$M" --eval "$EVAL" --window $W --stride $S --json > "$D/$m-ref.json"
  ref=$(jget "$D/$m-ref.json" perplexity)
  echo
  echo "### $m: $(jget "$D/$m-ref.json" scored) tokens scored, bf16 perplexity $(printf %.3f "$ref") (top-1 $(printf %.4f "$(jget "$D/$m-ref.json" top1_rate)"))"
  echo
  echo "| weights | bits/weight (quantized tensors) | rel. MSE (quantized tensors) | perplexity | vs bf16 (± token s.e.) | vs bf16 over seeds | mean KL (nats/token, ± token s.e.) | KL over seeds | top-1 agreement with bf16 | same-energy Gaussian noise: KL (vs bf16) |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  chosen=()
  for c in "${CONFIGS[@]}"; do
    name=${c%%:*} args=${c#*:}
    [[ $name =~ ${TQ_QUALITY_CONFIGS:-.} ]] || continue
    # shellcheck disable=SC2086
    convert_row "$name" $args
  done
  if [ -n "$LIBQ" ]; then
    # the tensors tq-convert quantizes, by their source names (a stack of experts: all of them)
    read -ra names < <("$BIN/tq-convert" --json --quiet --bits 4 "$M" "$D/$m-names" | python3 -c "
import json, re, sys
print(' '.join(re.sub(r'\.experts\.[0-9]+\.', '.experts.*.', t['source']) if 'switch_mlp' in t['name'] else t['source']
               for t in json.load(sys.stdin)['tensors'] if t.get('quantized')))")
    rm -rf "$D/$m-names"
    # tq's largest budget: what --target-bpw gives when asked for more than it can spend
    tqmax=$("$BIN/tq-convert" --dry-run --json --quiet --target-bpw 16 "$M" "$D/$m-max" | python3 -c "
import json, sys
print(json.load(sys.stdin)['bits_per_weight_quantized'])")
    targets=()
    for t in ${TQ_QUALITY_LLAMA:-q2_K q3_K q4_K iq3_s iq4_xs Q2_K Q3_K_M Q4_K_M IQ3_S IQ4_XS}; do
      case $t in [a-z]*) label="llama.cpp $t (pure)" ;; *) label="llama.cpp $t" ;; esac
      Q=$D/$m-llama-$t
      if [[ llama-$t =~ ${TQ_QUALITY_CONFIGS:-.} ]]; then
        /usr/bin/python3 "$ROOT/bench/kquant/kquant.py" "$LIBQ" "$t" "$M" "$Q" "${names[@]}" > "$Q.json"
        measure "$Q"
        row "$label" "$(jget1 "$Q.json" bits_per_weight)" "$Q.quality.json"
        chosen+=("$label:$Q.json")
        rm -rf "$Q"
      fi
      if [ -f "$Q.json" ]; then targets+=("$t:$(jget1 "$Q.json" bits_per_weight)"); fi
    done
    # a tq budget at each llama.cpp row's bits/weight (tq's largest where the row is above it:
    # asked for more, --target-bpw gives its largest), once per distinct budget
    done_bpw=" 2.5 3.5 4.5 "
    for tb in "${targets[@]}"; do
      t=${tb%%:*} bpw=${tb#*:}
      key=$(python3 -c "import sys; print('%g' % min(float(sys.argv[1]), float(sys.argv[2])))" "$bpw" "$tqmax")
      case $done_bpw in *" $key "*) continue ;; esac
      done_bpw+="$key "
      python3 -c "import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))" "$bpw" "$tqmax" || t=max
      [[ tq-bpw-at-$t =~ ${TQ_QUALITY_CONFIGS:-.} ]] || continue
      convert_row "tq-bpw-at-$t" --target-bpw "$bpw" --scale lsq --codebook gaussian
    done
  fi
  # what tq-convert chose per quantized module for the fitted and budget rows
  if [ ${#chosen[@]} -gt 0 ]; then
    echo
    for c in "${chosen[@]}"; do
      python3 - "${c%%:*}" "${c#*:}" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[2]))
if "per_tensor" in r:  # a llama.cpp row: weights per ggml type
    n = sum(r["weights_by_type"].values())
    print("- %s: %s" % (sys.argv[1], ", ".join("%s %.1f%%" % (t, 100.0 * w / n) for t, w in sorted(
        r["weights_by_type"].items(), key=lambda kv: -kv[1]))))
    sys.exit(0)
ts = [t for t in r["tensors"] if t.get("quantized")]
mix = collections.Counter((t["bits"], t["group_size"]) for t in ts)
fit = sum(t.get("codebook") == "fitted" for t in ts)
print("- %s: %s; fitted codebook kept on %d of %d modules" % (sys.argv[1], ", ".join(
    "%d× %d-bit g%d" % (n, b, g) for (b, g), n in sorted(mix.items())), fit, len(ts)))
PY
    done
  fi
done
