# kill -9 campaign (make check-long only): SIGKILL at 30 pseudo-random moments of each
# writing tool (convert, split, join, rowlayout, pack) on >= 200 MB inputs, from outside.
#
# For each tool: one undisturbed run gives the reference output and its wall time T. Then
# for i = 1..N the tool is started again and killed with SIGKILL after a delay drawn from a
# fixed seed in the i-th of N equal slices of (0, T), so the points cover the whole run
# (reading, writing, fsync, the publishing rename). After each kill:
#   - the final name either does not exist, or holds the complete output: byte-identical to
#     the reference and accepted by the tool's checker (tq-verify check for split and pack,
#     tq-rowlayout --check for the row file; convert and join outputs carry no manifest, so
#     for them byte equality with the reference is the check);
#   - nothing else appeared beside it but NAME.partial-* (counted: a SIGKILL cannot clean
#     up, so a kill mid-write leaves its partial behind);
#   - the input is unchanged (checked once per tool, after its N points);
#   - a re-run into the same name, with the partial still lying there, exits 0 and gives the
#     reference bytes (the re-run writes its own NAME.partial-XXXXXX and ignores the old
#     one; it does not remove it).
# The delay is deterministic; where the kill lands is not (it depends on the machine's
# load), so the summary says how many kills landed before the output was published, after
# it, and how many runs had already finished.
# TQ_KILL_POINTS=N (default 30) and TQ_KILL_SEED=S (default 20261201) override.
. "$ROOT/tests/lib/safety.sh"
N=${TQ_KILL_POINTS:-30}
SEED=${TQ_KILL_SEED:-20261201}
NICE="nice -n 10"

rng=$SEED
rand() { # next of a 31-bit linear congruential sequence (the C standard's example constants)
  rng=$(( (rng * 1103515245 + 12345) % 2147483648 ))
  echo "$rng"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Inputs: a qwen3_moe model (routed experts, so split writes expert files) just over 200 MB
# of bf16, and an ngram table of 210 MB for tq-rowlayout.
$NICE tq-mkmodel --quiet --seed 7 --layers 8 --hidden 512 --experts 16 --top-k 4 \
  --moe-intermediate 512 --heads 8 --kv-heads 4 --head-dim 64 --vocab 4096 \
  --shard-size 100000000B m || fail "tq-mkmodel (qwen3_moe) failed"
$NICE tq-mkmodel --quiet --arch ngram --rows 1050000 --width 320 --bits 4 n ||
  fail "tq-mkmodel (ngram) failed"
[ "$(out_bytes m)" -ge 200000000 ] || fail "the model is only $(out_bytes m) bytes"
[ "$(out_bytes n)" -ge 200000000 ] || fail "the ngram table is only $(out_bytes n) bytes"
# join reads a split; made once, outside the campaign of split itself
$NICE tq-split --quiet m s0 || fail "tq-split m s0 failed"

checker() { # TOOL OUT: the tool's own acceptance check of a complete output (none: true)
  case $1 in
    split) tq-verify check "$2" >/dev/null 2>&1 ;;
    pack) tq-verify check "$2" >/dev/null 2>&1 ;;
    rowlayout) tq-rowlayout --check "$2" >/dev/null 2>&1 ;;
    *) true ;;
  esac
}

listing() { ls -A | LC_ALL=C sort; }

summary=()
total_points=0
# campaign TOOL INPUT OUT -- CMD...
campaign() {
  local tool=$1 input=$2 out=$3; shift 4
  local in_hash ref t0 t1 T i lo hi d rc before after extra part
  local mid=0 published=0 finished=0 left=0
  in_hash=$(tree_hash "$input")
  rm -rf "$out" "$out".partial-*
  $NICE "$@" >/dev/null 2>&1 || fail "$tool: the reference run failed: $*"
  ref=$(tree_hash "$out")
  checker "$tool" "$out" || fail "$tool: the reference output is not accepted by its checker"
  rm -rf "$out"
  # T from a second run, with the input in the page cache as it is for the killed runs
  t0=$(now_ms)
  $NICE "$@" >/dev/null 2>&1 || fail "$tool: the second reference run failed: $*"
  t1=$(now_ms)
  T=$((t1 - t0)); [ "$T" -ge 1 ] || T=1
  [ "$(tree_hash "$out")" = "$ref" ] || fail "$tool: two undisturbed runs gave different bytes"
  rm -rf "$out"
  before=$(listing)
  for ((i = 0; i < N; i++)); do
    lo=$((T * i / N)); hi=$((T * (i + 1) / N))
    d=$((lo + $(rand) % (hi - lo + 1)))
    $NICE "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ]; then
      finished=$((finished + 1))
    elif [ "$rc" -ne 137 ]; then
      fail "$tool, point $i (${d} ms): exit $rc, neither killed (137) nor finished"
    fi
    if [ -e "$out" ] || [ -L "$out" ]; then
      [ "$(tree_hash "$out")" = "$ref" ] ||
        fail "$tool killed after ${d} ms: $out exists and is not the complete output"
      checker "$tool" "$out" || fail "$tool killed after ${d} ms: $out is refused by its checker"
      [ "$rc" -eq 137 ] && published=$((published + 1))
    else
      [ "$rc" -eq 0 ] && fail "$tool finished (point $i) without publishing $out"
      mid=$((mid + 1))
    fi
    # nothing but OUT and OUT.partial-* may have appeared
    after=$(listing)
    extra=$(comm -13 <(echo "$before") <(echo "$after") | grep -vx -- "$out" |
      grep -v -- "^$out\.partial-[A-Za-z0-9]*\$" || true)
    [ -z "$extra" ] || fail "$tool killed after ${d} ms: stray files: $extra"
    part=$(partials "$out")
    left=$((left + $(grep -c . <<<"$part")))
    # re-run into the same name with the partial still there (a complete output is set
    # aside first: the tools refuse to replace an existing output without --force)
    rm -rf "$out"
    $NICE "$@" >/dev/null 2>rerun.err || fail "$tool: re-run after a kill at ${d} ms failed: $(cat rerun.err)"
    # (the same bytes as the reference, which its checker accepted)
    [ "$(tree_hash "$out")" = "$ref" ] || fail "$tool: re-run after a kill at ${d} ms gave other bytes"
    [ "$(partials "$out")" = "$part" ] || fail "$tool: the re-run changed the partials: $(partials "$out")"
    # and named them (issue 32: one note, names and sizes, nothing removed)
    [ -z "$part" ] || grep -q "^tq-[a-z]*: note: .*partial output.* not removed: " rerun.err ||
      fail "$tool: the re-run did not name the partials: $(cat rerun.err)"
    rm -rf "$out" "$out".partial-* rerun.err
  done
  [ "$(tree_hash "$input")" = "$in_hash" ] || fail "$tool: the input changed during the campaign"
  total_points=$((total_points + N))
  summary+=("$(printf '%-9s T=%5d ms, %2d points: %2d killed before publishing (%2d partials left), %d killed after, %d had finished; %d re-runs identical' \
    "$tool" "$T" "$N" "$mid" "$left" "$published" "$finished" "$N")")
}

campaign convert m c -- tq-convert --quiet m c
campaign split m s -- tq-split --quiet m s
campaign join s0 j -- tq-split --quiet --join s0 j
campaign rowlayout n r.safetensors -- tq-rowlayout --quiet n/model.safetensors --out r.safetensors
campaign pack m b.tar.zst -- tq-verify pack --quiet m -o b.tar.zst

echo "kill -9 campaign, seed $SEED, inputs $(out_bytes m) B (qwen3_moe bf16) and $(out_bytes n) B (ngram):"
printf '%s\n' "${summary[@]}"
echo "$total_points kill points: every output absent or complete, every re-run identical"
