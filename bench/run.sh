#!/usr/bin/env bash
# tq-run streaming the generated 8 GB MoE (split with tq-split) with --cache-budget 512M:
# tokens/s, expert hit rate, bytes/token, effective read rate against the floor
# `cat experts/* > /dev/null` measured in the same run, peak RSS (target ≤ pinned + budget +
# 256 MiB) and page-cache growth (/proc/meminfo Cached, target ≤ 10% of the bytes read);
# the same decode through plain buffered reads for comparison; and the quality figure of the
# TurboQuant model: top-1 agreement and mean KL per step against the unquantized model.
# TQ_BENCH_SIZE=tiny checks the script on a tiny model, TQ_BENCH_MODEL=DIR uses an existing
# model (derived DIR.split, DIR.tq are made next to it); TQ_BENCH_TOKENS (default 8) tokens,
# TQ_BENCH_BUDGET the cache budget, TQ_BENCH_ARCH the family (default qwen3_moe; bench/hybrid.sh
# runs qwen3_5_moe), TQ_BENCH_QUALITY=0 skips the TurboQuant quality step.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs run tq-mkmodel tq-split tq-run
NTOK=${TQ_BENCH_TOKENS:-8}
PROMPT=1,2,3,4
if [ -n "${TQ_BENCH_MODEL:-}" ]; then
  M=$TQ_BENCH_MODEL BUDGET=${TQ_BENCH_BUDGET:-512M}
elif [ "${TQ_BENCH_SIZE:-}" = tiny ]; then
  M=$(moe_model tiny "${TQ_BENCH_ARCH:-}") BUDGET=${TQ_BENCH_BUDGET:-64K}
else
  M=$(moe_model 8g "${TQ_BENCH_ARCH:-}") BUDGET=${TQ_BENCH_BUDGET:-512M}
fi

# derived models, made once per source
S=$M.split
made "$S" "$BIN/tq-split" --quiet "$M" "$S"

# Page cache held for the split's files: fincore (mincore) on exactly those files when
# available, else the system-wide /proc/meminfo Cached (noisy on a busy machine).
cached_kib() {
  if command -v fincore >/dev/null; then
    fincore --bytes --noheadings --output RES "$S"/experts/*.bin "$S"/*.safetensors | awk '{s += $1} END {print int(s / 1024)}'
  else
    awk '/^Cached:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0
  fi
}

expert_files=("$S"/experts/*.bin)
expert_bytes=$(total_bytes "${expert_files[@]}")
model_bytes=$(total_bytes "$M"/*.safetensors)
printf 'run: %s: %s, %s bytes of weights, %s bytes of expert blocks in %s layer files, cache budget %s\n' \
  "$(basename "$M")" "$(jget "$M/config.json" model_type)" "$model_bytes" "$expert_bytes" "${#expert_files[@]}" "$BUDGET"
drop_caches
timed sh -c 'cat "$@" > /dev/null' cat "${expert_files[@]}"
t_cat=$T
floor_mibs=$(echo "$expert_bytes / 1048576 / $t_cat" | bc -l)

# run MODE OUT [extra options]: one decode, cold cache; sets ROUT (json) and DCACHE (KiB)
run_one() {
  local out=$1; shift
  drop_caches
  local c0 c1
  c0=$(cached_kib)
  timed "$BIN/tq-run" "$S" --tokens "$PROMPT" --max-tokens "$NTOK" --cache-budget "$BUDGET" --json "$@" > "$out"
  c1=$(cached_kib)
  DCACHE=$((c1 - c0))
}

report() { # report LABEL JSON DCACHE
  local j=$2 pinned rss br tps hr bpt dec budget_bytes
  pinned=$(jget "$j" resident_bytes) rss=$(jget "$j" peak_rss) br=$(jget "$j" bytes_read)
  tps=$(jget "$j" tokens_per_s) hr=$(jget "$j" hit_rate) bpt=$(jget "$j" bytes_per_token)
  dec=$(jget "$j" io_s) budget_bytes=$(jget "$j" cache_budget)
  local limit=$((pinned + budget_bytes + 268435456)) growth=$(( $3 * 1024 ))
  local rate
  rate=$(echo "if ($dec > 0) $br / 1048576 / $dec else 0" | bc -l)
  printf 'run: %-9s %.2f tokens/s, hit rate %.4f, %s bytes/token, read %s bytes (%.1f MiB/s while reading = %.3f x cat floor %.1f MiB/s), io %s\n' \
    "$1" "$tps" "$hr" "$bpt" "$br" "$rate" "$(echo "$rate / $floor_mibs" | bc -l)" "$floor_mibs" "$(jget "$j" io)"
  # the floor for the same bytes: reading bytes/token at the cat rate, and nothing else
  printf 'run: %-9s floor: %s bytes/token at the cat rate take %.3f s/token (%.2f tokens/s if decoding only read); tq-run %.3f s/token\n' \
    "$1" "$bpt" "$(echo "$bpt / 1048576 / $floor_mibs" | bc -l)" \
    "$(echo "if ($bpt > 0) $floor_mibs * 1048576 / $bpt else 0" | bc -l)" "$(echo "if ($tps > 0) 1 / $tps else 0" | bc -l)"
  local pct
  pct=$(echo "if ($br > 0) 100 * $growth / $br else 0" | bc -l)
  printf 'run: %-9s peak RSS %s bytes (limit pinned %s + budget %s + 256 MiB = %s: %s); page cache %+d KiB = %.2f%% of bytes read (%s, target <= 10%%)\n' \
    "$1" "$rss" "$pinned" "$budget_bytes" "$limit" "$([ "$rss" -le "$limit" ] && echo ok || echo EXCEEDED)" \
    "$3" "$pct" "$(command -v fincore >/dev/null && echo "fincore of the split's files" || echo "/proc/meminfo Cached")"
}

run_one "$TQ_BENCH_DIR/run-direct.json" --force --logits "$TQ_BENCH_DIR/run-ref.f32"
report direct "$TQ_BENCH_DIR/run-direct.json" "$DCACHE"
run_one "$TQ_BENCH_DIR/run-buffered.json" --no-direct
report buffered "$TQ_BENCH_DIR/run-buffered.json" "$DCACHE"
[ "$(jget "$TQ_BENCH_DIR/run-direct.json" logits_sha256)" = "$(jget "$TQ_BENCH_DIR/run-buffered.json" logits_sha256)" ] &&
  echo "run: direct and buffered logits identical" || echo "run: direct and buffered logits DIFFER"

# quality of the TurboQuant model against the unquantized one (same prompt, greedy)
if [ "${TQ_BENCH_QUALITY:-1}" = 0 ]; then
  echo "run: quality skipped (TQ_BENCH_QUALITY=0)"
elif [ -x "$BIN/tq-convert" ]; then
  Q=$M.tq
  if [ ! -f "$Q.split/.complete" ]; then # the unsplit TQ model is only a step: not kept
    made "$Q" "$BIN/tq-convert" --quiet "$M" "$Q"
    made "$Q.split" "$BIN/tq-split" --quiet "$Q" "$Q.split"
    rm -rf "$Q"
  fi
  REF_TOKENS=$(jget "$TQ_BENCH_DIR/run-direct.json" tokens | tr -d '[] ')
  # teacher-forced on the unquantized model's tokens, so every step sees the same context
  "$BIN/tq-run" "$Q.split" --tokens "$PROMPT" --max-tokens "$NTOK" --cache-budget "$BUDGET" --quiet \
    --force-tokens "$REF_TOKENS" --force --logits "$TQ_BENCH_DIR/run-tq.f32" > "$TQ_BENCH_DIR/run-tq.tokens"
  V=$(jget "$TQ_BENCH_DIR/run-direct.json" vocab)
  "$BIN/tq-run" --compare-logits "$TQ_BENCH_DIR/run-ref.f32" "$TQ_BENCH_DIR/run-tq.f32" --vocab "$V" --json \
    > "$TQ_BENCH_DIR/run-quality.json"
  printf 'run: TurboQuant vs unquantized over %s teacher-forced steps: top-1 agreement %.4f, mean KL %.5f nats/step (max %.5f)\n' \
    "$(jget "$TQ_BENCH_DIR/run-quality.json" steps)" "$(jget "$TQ_BENCH_DIR/run-quality.json" top1_rate)" \
    "$(jget "$TQ_BENCH_DIR/run-quality.json" mean_kl)" "$(jget "$TQ_BENCH_DIR/run-quality.json" max_kl)"
  echo "run: greedy tokens unquantized $REF_TOKENS; TurboQuant argmax per step $(cat "$TQ_BENCH_DIR/run-tq.tokens")"
else
  echo "run: quality skipped (needs $BIN/tq-convert)"
fi
