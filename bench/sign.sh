#!/usr/bin/env bash
# tq-verify sign and verify (OpenSSF Model Signing, ECDSA P-256) on the generated 8 GB MoE
# against the floor `sha256sum` of the same files, measured in the same run: 1 thread and the
# default thread count. Target: throughput >= 0.9x sha256sum's (time ratio sha256sum/tool
# >= 0.9), peak RSS that does not grow with the model (a few 8 MiB read buffers).
# Each run from a cold page cache when caches can be dropped (root), otherwise all warm.
# Best of two rounds. Also checks that the signed digests equal sha256sum's.
# TQ_BENCH_SIZE=tiny: the tiny preset (checks the script in seconds); small: the 8g preset
# cut to 2 layers (~2.3 GB).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs sign tq-verify tq-mkmodel
command -v openssl >/dev/null || { echo "sign: skipped (needs openssl)"; exit 0; }

case "${TQ_BENCH_SIZE:-8g}" in
  tiny | small) src=$(moe_model "$TQ_BENCH_SIZE") ;;
  *) src=$(moe_model 8g) ;;
esac
# A hard-linked copy: sign writes model.sig into it, the shared model stays untouched.
view=$TQ_BENCH_DIR/sign-view
rm -rf "$view"
cp -al "$src" "$view"
rm -f "$view/.complete" "$view/SHA256SUMS" "$view/tq-manifest.json" "$view/model.sig"
key=$TQ_BENCH_DIR/sign-key.pem pub=$TQ_BENCH_DIR/sign-key.pub
openssl ecparam -name prime256v1 -genkey -noout -out "$key" 2>/dev/null
openssl pkey -in "$key" -pubout -out "$pub"
(cd "$view" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) > "$TQ_BENCH_DIR/sign-files"
nfiles=$(wc -l < "$TQ_BENCH_DIR/sign-files")
bytes=$(cd "$view" && xargs -d '\n' stat -c %s < "$TQ_BENCH_DIR/sign-files" | awk '{s += $1} END {printf "%.0f\n", s}')
threads=$(nproc)

mapfile -t files < <(sed "s|^|$view/|" "$TQ_BENCH_DIR/sign-files")
cache=$(cache_mode "${files[@]}")
t_sum="" ts1="" tsn="" tv1="" tvn="" rss=0
for round in 1 2; do
  drop_caches
  timed sh -c 'cd "$1" && xargs -d "\n" sha256sum < "$2" > "$3"' sh "$view" "$TQ_BENCH_DIR/sign-files" "$TQ_BENCH_DIR/sign-sha256sum.out"
  t_sum=$(best "$t_sum" "$T")
  printf 'sign: round %d: sha256sum %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
  for n in 1 "$threads"; do
    drop_caches
    timed "$BIN/tq-verify" sign --quiet --force --threads "$n" --key "$key" "$view"
    [ "${RSS:-0}" -gt "$rss" ] && rss=$RSS
    if [ "$n" = 1 ]; then ts1=$(best "$ts1" "$T"); else tsn=$(best "$tsn" "$T"); fi
    printf 'sign: round %d: sign, %d thread(s) %.3f s (user %s s, sys %s s; peak RSS %s KiB; load %s)\n' $round "$n" "$T" "$UT" "$ST" "$RSS" "$(load)"
    drop_caches
    timed "$BIN/tq-verify" verify --quiet --threads "$n" --pubkey "$pub" "$view"
    [ "${RSS:-0}" -gt "$rss" ] && rss=$RSS
    if [ "$n" = 1 ]; then tv1=$(best "$tv1" "$T"); else tvn=$(best "$tvn" "$T"); fi
    printf 'sign: round %d: verify, %d thread(s) %.3f s (user %s s, sys %s s; peak RSS %s KiB; load %s)\n' $round "$n" "$T" "$UT" "$ST" "$RSS" "$(load)"
  done
done
# The signed digests are sha256sum's.
python3 - "$view/model.sig" "$TQ_BENCH_DIR/sign-sha256sum.out" <<'EOF' || { echo "sign: signed digests differ from sha256sum's"; exit 1; }
import base64, json, sys
s = json.loads(base64.b64decode(json.load(open(sys.argv[1]))["dsseEnvelope"]["payload"]))
signed = {r["name"]: r["digest"] for r in s["predicate"]["resources"]}
summed = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in open(sys.argv[2]))
sys.exit(0 if signed == summed else 1)
EOF
echo "sign: $src: $bytes bytes in $nfiles files, $cache cache, $threads CPUs"
printf 'sign: sha256sum %.3f s (%s MiB/s); sign 1 thread %.3f s, %d threads %.3f s; verify 1 thread %.3f s, %d threads %.3f s\n' \
  "$t_sum" "$(mib_s "$bytes" "$t_sum")" "$ts1" "$threads" "$tsn" "$tv1" "$threads" "$tvn"
echo "sign: throughput ratio tool/sha256sum: sign $(ratio "$t_sum" "$ts1") (1 thread), $(ratio "$t_sum" "$tsn") ($threads); verify $(ratio "$t_sum" "$tv1") (1 thread), $(ratio "$t_sum" "$tvn") ($threads) (target >= 0.9); peak RSS $rss KiB"
rm -rf "$view"
