# The one rule of outputs (man tq-formats(5), OUTPUTS; issue 31), on every output of every
# tool as the tools' own option tables list them (TQ_CLI_TABLE=outputs: options made with
# TQ_OPT_OUT_FILE/TQ_OPT_OUT_DIR, output operands, implied outputs), so that a new output
# cannot skip it: each must have a case below or this test fails. On each: (1) the output
# appears while the tool writes (stopped by TQ_PAUSE_AFTER_BYTES=1, someone else's file or
# directory made, continued): exit 1 naming it, theirs intact, the complete partial kept and
# named; (2) two writers into one new output: exactly one exits 0; (3) an existing output:
# refused without --force (exit 1, untouched), replaced with --force (a new inode). A check of
# consistency with the rule as tq-formats(5) states it.
set -u
. "$ROOT/tests/lib/safety.sh"
. "$ROOT/tests/lib/keys.sh"
safety_inputs
make_key k ed25519
tq-convert --quiet src cq || fail "convert for quality"

# The outputs, from the tables: "TOOL [COMMAND] WHAT<TAB>KIND" lines.
listed=$(
  for t in tq-convert tq-split tq-mkmodel tq-rowlayout tq-run; do
    TQ_CLI_TABLE=outputs "$t" </dev/null | sed "s|^|$t |"
  done
  for c in $(tq-verify --help | sed -n '/^Commands:/,/^$/{/^  [a-z]/s/^  \([a-z-]*\).*/\1/p}'); do
    TQ_CLI_TABLE=outputs tq-verify "$c" </dev/null | sed "s|^|tq-verify $c |"
  done
)
[ "$(grep -c . <<<"$listed")" -ge 14 ] || fail "too few outputs listed: $listed"

# case KEY: sets OUT (what the run publishes), CMD (the run, without --force) and REPL: "force"
# (--force replaces, without it refused), or "own" (the command replaces its own earlier output
# by design, man tq-formats(5), OUTPUTS); TWO=0 where the pair is published as one (run once).
case_of() {
  TWO=1 REPL=force
  case $1 in
    "tq-convert operand 2") OUT=cv CMD=(tq-convert --quiet --threads 2 src cv) ;;
    "tq-split operand 2") OUT=sp CMD=(tq-split --quiet --threads 2 src sp) ;;
    "tq-mkmodel operand 1") OUT=mm CMD=(tq-mkmodel --quiet --seed 9 mm) ;;
    "tq-rowlayout --out") OUT=r.rows CMD=(tq-rowlayout ng/model.safetensors --out r.rows --quiet --chunk-size 4K) ;;
    "tq-rowlayout --to") OUT=ex/model.safetensors CMD=(tq-rowlayout --extract r0.rows --to ex --quiet --chunk-size 4K) ;;
    "tq-run --logits") OUT=l.bin CMD=(tq-run src --tokens 1,2 --max-tokens 2 --logits l.bin) ;;
    "tq-verify manifest implied DIR/SHA256SUMS") OUT=ms/SHA256SUMS CMD=(tq-verify manifest --quiet ms) REPL=own TWO=0 ;;
    "tq-verify manifest implied DIR/tq-manifest.json") OUT=ms/tq-manifest.json CMD=(tq-verify manifest --quiet ms) REPL=own ;;
    "tq-verify sign --out") OUT=s.sig CMD=(tq-verify sign --quiet src --key k.pem --out s.sig) ;;
    "tq-verify sign implied DIR/model.sig") OUT=ss/model.sig CMD=(tq-verify sign --quiet ss --key k.pem) ;;
    "tq-verify golden --golden") OUT=g.json CMD=(tq-verify golden --quiet src --golden g.json --update --tokens 1,2 --max-tokens 2) REPL=own ;;
    "tq-verify pack --output") OUT=pk.tar.zst CMD=(tq-verify pack --quiet src -o pk.tar.zst) ;;
    "tq-verify unpack --output") OUT=un CMD=(tq-verify unpack --quiet b.tar.zst -o un) ;;
    "tq-verify quality --plot") OUT=q.svg CMD=(tq-verify quality --quiet src cq --plot q.svg) ;;
    *) fail "output '$1' has no case in tests/cli/outputs-rule.sh: every output must be run through the rule" ;;
  esac
}
cp -a src ms
cp -a src ss

# (3) an existing output: refused untouched without --force, replaced with it
existing() {
  local ino before
  rm -rf "$OUT" "$OUT".partial-*
  "${CMD[@]}" >/dev/null || fail "undisturbed run failed: ${CMD[*]}"
  if [ "$REPL" = own ]; then
    ino=$(stat -c %i "$OUT")
    "${CMD[@]}" >/dev/null || fail "${CMD[*]}: does not replace its own earlier output"
    [ "$(stat -c %i "$OUT")" != "$ino" ] || fail "${CMD[*]}: not replaced by a new file"
    echo "replaces its own earlier output: ${CMD[*]}"
    return
  fi
  if [ -d "$OUT" ] && [ "${CMD[0]}" = tq-mkmodel ]; then : # it replaces only its own directory
  elif [ -d "$OUT" ]; then rm -rf "$OUT"; make_theirs "$OUT" dir
  else echo "not yours" >"$OUT"; fi
  before=$(tree_hash "$OUT"); ino=$(stat -c %i "$OUT")
  expect_msg 1 "use --force to replace it" "${CMD[@]}"
  [ "$(tree_hash "$OUT")" = "$before" ] && [ -z "$(partials "$OUT")" ] || fail "${CMD[*]}: touched $OUT or left a partial"
  "${CMD[@]}" --force >/dev/null || fail "${CMD[*]} --force failed"
  [ "$(stat -c %i "$OUT")" != "$ino" ] && [ -z "$(partials "$OUT")" ] || fail "${CMD[*]} --force: $OUT not replaced"
  echo "existing output refused, then replaced with --force: ${CMD[*]}"
}

n=0
while IFS=$'\t' read -r key kind; do
  [ -n "$key" ] || continue
  case_of "$key"
  echo "== $key ($kind)"
  output_appears "$OUT" 1 -- "${CMD[@]}"
  [ "$TWO" = 0 ] || TWO_OWN=$([ "$REPL" = own ] && echo 1 || echo 0) TWO_AT=1 two_writers "$OUT" 1 -- "${CMD[@]}"
  existing
  rm -rf "$OUT" "$OUT".partial-*
  n=$((n + 1))
done <<<"$listed"
echo "$n outputs checked"
exit 0
