# tq-convert --dry-run and tq-split --dry-run write nothing and predict every file of the real
# run exactly: the same names, and each file's size to the byte (shards and their index,
# config.json, copied and generated extras, pinned.safetensors, layer files, split.json),
# for several layouts; --json says the same; the refusals of a real run come first; --quiet
# leaves only the exit status (and errors), --json prints whatever --quiet says.
. "$ROOT/tests/lib/common.sh"
# "SIZE NAME" per regular file under DIR, sorted by name (what a run really wrote)
listing() { (cd "$1" && find . -type f -printf '%s %P\n' | LC_ALL=C sort -k2); }
# the same from a dry run's text: lines "  NAME   SIZE bytes" between the header and "total:"
predicted() { sed -n 's/^  \([^ ]*\) *\([0-9]*\) bytes$/\2 \1/p' "$1" | LC_ALL=C sort -k2; }
check() { # NAME TOOL ARGS... (the last argument is the output directory)
  local name=$1 out
  shift
  for out; do :; done
  "$@" --dry-run > "$name.plan" || fail "$name: dry run failed"
  [ ! -e "$out" ] && ! compgen -G "$out.partial-*" >/dev/null || fail "$name: the dry run wrote $out"
  grep -q '^total: [0-9]* bytes' "$name.plan" || fail "$name: no total line"
  "$@" --dry-run --json > "$name.json" || fail "$name: dry run --json failed"
  [ "$(jget "$name.json" dry_run)" = true ] || fail "$name: --json lacks dry_run"
  "$@" --quiet || fail "$name: the real run failed"
  listing "$out" > "$name.real"
  predicted "$name.plan" > "$name.pred"
  [ -s "$name.pred" ] || fail "$name: no files listed"
  diff "$name.pred" "$name.real" >&2 || fail "$name: predicted files differ from the written ones"
  local total
  total=$(awk '{s += $1} END {print s}' "$name.real")
  grep -q "^total: $total bytes" "$name.plan" || fail "$name: total is not $total ($(grep total "$name.plan"))"
  [ "$(jget "$name.json" output_bytes)" = "$total" ] || fail "$name: --json output_bytes is not $total"
}
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 1 moe
run tq-mkmodel --quiet --arch llama --size tiny --seed 2 --shard-size 400k llama
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 3 --naming mlx --quant affine4 --shared-expert aff
check convert-1shard tq-convert moe c1
check convert-shards tq-convert --shard-size 300k --bits 2 --group-size 32 moe c2
check convert-llama tq-convert --bits 4 --bits-for 'down_proj=2' --keep 'o_proj' llama c3
check convert-affine tq-convert --method affine --bits 8 moe c4
check convert-plain tq-convert --no-quantize --dtype f32 --shard-size 100k llama c5
check convert-deq tq-convert --dequantize c1 c6
run cp "$ROOT/testdata/vectors/ggml-vectors.gguf" v.gguf
check convert-gguf tq-convert --no-quantize v.gguf c7
check split-moe tq-split moe s1
check split-dense tq-split llama s2
check split-quantized tq-split --align 4096 c2 s3
check split-mlx-sniper tq-split --target mlx-sniper aff s4
check split-mac-code tq-split --target mac-code aff s5
# what a streaming engine needs; with --ram the verdict per target
tq-split --dry-run moe s6 > p1
grep -q '^a streaming engine needs at least [0-9]* bytes' p1 || fail "no RAM line"
tq-split --dry-run --ram 64G moe s6 | grep -qx 'target tq: fits in 68719476736 bytes of RAM' || fail "64G verdict"
tq-split --dry-run --ram 1G moe s6 | grep -qx 'target tq: does not fit in 1073741824 bytes of RAM' || fail "1G verdict"
tq-split --plan --ram 1G moe | grep -q '^target tq: does not fit' || fail "--plan verdict"
# --plan ends in the verdict for --target and its exit status says it: 0 fits, 3 does not
# (issue 32: 'does not fit' came with exit 0)
tq-split --plan --ram 1G moe > v1; rc=$?
[ $rc = 3 ] || fail "--plan that does not fit: exit $rc"
tail -n1 v1 | grep -qx 'verdict: does not fit: target tq needs at least [0-9.]* GiB of RAM, the machine has 1.00 GiB' ||
  fail "--plan verdict line: $(tail -n1 v1)"
tq-split --plan --ram 64G moe > v2 || fail "--plan that fits: exit $?"
tail -n1 v2 | grep -qx 'verdict: fits: target tq needs at least [0-9.]* GiB of RAM, the machine has 64.00 GiB' ||
  fail "--plan verdict line: $(tail -n1 v2)"
tq-split --plan --ram 1G --json moe > v3.json; rc=$?
[ $rc = 3 ] && python3 -c 'import json,sys; json.load(open("v3.json"))' || fail "--plan --json that does not fit: exit $rc"
# a bare number is not a size: refused, with the unit suggested (it was 16 bytes)
expect_msg 2 "size '16' for --ram has no unit: write 16G" tq-split --plan --ram 16 moe
expect_msg 2 "size '300' for --shard-size has no unit" tq-convert --shard-size 300 moe c9
expect_msg 2 "for --cache-budget has no unit" tq-run moe --tokens 1 --cache-budget 512
expect_msg 2 "for --chunk-size has no unit" tq-rowlayout x --out y --chunk-size 4096
expect_msg 2 "for --shard-size has no unit" tq-mkmodel --shard-size 100000 mk
[ ! -e s6 ] || fail "dry runs wrote s6"
# a dry run refuses what the run would refuse
mkdir full && echo x > full/f
expect_msg 1 'not empty' tq-convert --dry-run moe full
expect_msg 1 'not empty' tq-split --dry-run moe full
expect_msg 2 'inside' tq-convert --dry-run moe moe/sub
expect_msg 2 'not with --join' tq-split --dry-run --join s1 j
expect_msg 2 'goes with --plan or --dry-run' tq-split --ram 1G moe s7
[ "$(ls full)" = f ] || fail "a refused dry run touched full/"
# --quiet: no plan (the exit status says whether the run would go ahead), errors still
# printed; --json prints its plan whatever --quiet says (the rule of every tool)
quiet_ok() { # TOOL ARGS...: exit 0, nothing on stdout or stderr, nothing written
  "$@" >q.out 2>q.err || fail "$*: exit $? ($(cat q.err))"
  [ ! -s q.out ] && [ ! -s q.err ] || fail "$*: printed: $(cat q.out q.err | head -5)"
}
quiet_ok tq-convert --dry-run --quiet moe c8
quiet_ok tq-split --dry-run --quiet --ram 1G moe s8
quiet_ok tq-split --plan --quiet --ram 64G moe
tq-split --plan --quiet --ram 1G moe >q.out 2>q.err; rc=$?
[ $rc = 3 ] && [ ! -s q.out ] && [ ! -s q.err ] || fail "--plan --quiet that does not fit: exit $rc, $(cat q.out q.err)"
[ ! -e c8 ] && [ ! -e s8 ] || fail "a quiet dry run wrote its output"
expect_msg 1 'not empty' tq-convert --dry-run --quiet moe full
expect_msg 1 'not empty' tq-split --dry-run --quiet moe full
same_plan() { # A.json B.json: the same document but for the timings (seconds, rates)
  python3 - "$1" "$2" <<'PY'
import json, sys
def plan(p):
    return {k: v for k, v in json.load(open(p)).items() if "seconds" not in k and "_per_" not in k}
a, b = plan(sys.argv[1]), plan(sys.argv[2])
assert a == b and a.get("files"), (a, b)
PY
}
tq-convert --dry-run --json moe c8 > loud.json && tq-convert --dry-run --json --quiet moe c8 > quiet.json ||
  fail "convert --dry-run --json --quiet"
same_plan loud.json quiet.json || fail "convert --dry-run --json: --quiet changed the plan"
tq-split --dry-run --json moe s8 > loud.json && tq-split --dry-run --json --quiet moe s8 > quiet.json ||
  fail "split --dry-run --json --quiet"
cmp -s loud.json quiet.json || fail "split --dry-run --json: --quiet changed the plan"
tq-split --plan --ram 64G --json moe > loud.json && tq-split --plan --ram 64G --json --quiet moe > quiet.json ||
  fail "split --plan --json --quiet"
cmp -s loud.json quiet.json || fail "split --plan --json: --quiet changed the plan"
tq-verify ls --json moe > loud.json && tq-verify ls --json --quiet moe > quiet.json || fail "ls --json --quiet"
[ -s quiet.json ] && cmp -s loud.json quiet.json || fail "ls --json: --quiet dropped or changed the listing"
echo "dry runs predict every file to the byte and write nothing"
