# tq-convert and tq-split warn (one line on stderr, tq_run_decodes false in --json) when tq-run
# cannot decode the model's family, naming the families it can; a family it decodes goes
# through without the warning. The answer is the decoder's own (tq_run_decode_warning reads
# the family table's decode.decoder, formats/family.h), so it is held here to what tq-run does: every family
# tq-mkmodel makes (the family table's) is split and converted, and the warning appears
# exactly when tq-run refuses the model as not supported. A family added to the table (and to
# tq-mkmodel) without its decoder is warned about, and one given a decoder is listed.
. "$ROOT/tests/lib/common.sh"

# tq-mkmodel's families, from its own usage message ("expected a, b, ... or ngram")
archs=$(tq-mkmodel --arch '?' x 2>&1 | sed -n 's/.*(expected \(.*\) or ngram).*/\1/p' | tr -d ',')
[ "$(echo "$archs" | wc -w)" -ge 10 ] || fail "tq-mkmodel's families not found: $archs"

# phi3 (not in the table): llama's tensors under model_type phi3, as phi3 configs go through
# both tools silently before
run tq-mkmodel --quiet --arch llama --size tiny m
sed -i 's/"model_type": "llama"/"model_type": "phi3"/; s/LlamaForCausalLM/Phi3ForCausalLM/' m/config.json
grep -q '"model_type": "phi3"' m/config.json || fail "phi3 config not made"
tq-convert m c >/dev/null 2>err || fail "tq-convert phi3: exit $? ($(cat err))"
[ "$(grep -c warning err)" = 1 ] || fail "tq-convert phi3: not one warning line: $(cat err)"
grep -q '^tq-convert: warning: tq-run cannot decode model_type "phi3" (tq-run decodes llama, mistral, qwen2, ' err ||
  fail "tq-convert phi3: $(cat err)"
tq-split m s >/dev/null 2>err || fail "tq-split phi3: exit $? ($(cat err))"
[ "$(grep -c warning err)" = 1 ] || fail "tq-split phi3: not one warning line: $(cat err)"
grep -q '^tq-split: warning: tq-run cannot decode model_type "phi3" (tq-run decodes llama, mistral, qwen2, ' err ||
  fail "tq-split phi3: $(cat err)"
# the list is what tq-run names when it refuses the converted model
list=$(sed 's/.*(tq-run decodes \(.*\))$/\1/' err)
tq-run c --tokens 1 --max-tokens 1 >/dev/null 2>run.err && fail "tq-run decoded phi3"
grep -qF "model_type \"phi3\" is not supported ($list)" run.err || fail "tq-run's list differs: $(cat run.err) / $list"
# --json: the field, whatever the text; --quiet: no warning
tq-convert --json m c2 >c2.json 2>/dev/null || fail "tq-convert --json phi3"
[ "$(jget c2.json tq_run_decodes)" = false ] || fail "tq-convert --json: tq_run_decodes $(jget c2.json tq_run_decodes)"
tq-split --json m s2 >s2.json 2>/dev/null || fail "tq-split --json phi3"
[ "$(jget s2.json tq_run_decodes)" = false ] || fail "tq-split --json: tq_run_decodes $(jget s2.json tq_run_decodes)"
tq-split --dry-run --json m s3 >s3.json 2>/dev/null || fail "tq-split --dry-run --json phi3"
[ "$(jget s3.json tq_run_decodes)" = false ] || fail "tq-split --dry-run --json: $(jget s3.json tq_run_decodes)"
tq-convert --quiet m c4 2>err || fail "tq-convert --quiet phi3"
[ ! -s err ] || fail "tq-convert --quiet printed: $(cat err)"

# every family of the table: warned about exactly when tq-run refuses it
n_dec=0 n_not=0
for a in $archs; do
  run tq-mkmodel --quiet --arch $a --size tiny f-$a
  tq-split --dry-run --json f-$a sd-$a >sd.json 2>sd.err || fail "$a: tq-split --dry-run: $(cat sd.err)"
  tq-convert --json f-$a c-$a >cv.json 2>cv.err || fail "$a: tq-convert: $(cat cv.err)"
  if tq-run f-$a --tokens 1,2 --max-tokens 2 --quiet >/dev/null 2>run.err; then
    n_dec=$((n_dec + 1))
    [ "$(jget sd.json tq_run_decodes)" = true ] || fail "$a: tq-run decodes it, tq-split says tq_run_decodes false"
    [ "$(jget cv.json tq_run_decodes)" = true ] || fail "$a: tq-run decodes it, tq-convert says tq_run_decodes false"
    ! grep -q 'cannot decode' sd.err cv.err || fail "$a: warned though tq-run decodes it: $(cat sd.err cv.err)"
    mt=$(jget f-$a/config.json model_type)
    case ", $list, " in *", $mt, "*) ;; *) fail "$a: decoded, but model_type $mt is not in the warning's list" ;; esac
  else
    n_not=$((n_not + 1))
    grep -q 'is not supported' run.err || fail "$a: tq-run fails for another reason: $(cat run.err)"
    [ "$(jget sd.json tq_run_decodes)" = false ] || fail "$a: tq-run refuses it, tq-split says tq_run_decodes true"
    [ "$(jget cv.json tq_run_decodes)" = false ] || fail "$a: tq-run refuses it, tq-convert says tq_run_decodes true"
    grep -q "^tq-split: warning: tq-run cannot decode model_type" sd.err || fail "$a: tq-split did not warn"
    grep -q "^tq-convert: warning: tq-run cannot decode model_type" cv.err || fail "$a: tq-convert did not warn"
  fi
done
echo "phi3 warned in tq-convert and tq-split; $n_dec families decoded without a warning, $n_not warned about: ok"
