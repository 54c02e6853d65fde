# The man pages' EXAMPLES run as written: every command of each tool's EXAMPLES section
# (tests/lib/man-examples.awk extracts them), in order, in one directory per page holding
# generated stand-ins for the inputs the page names, with the names it uses. A command exits
# 0 unless listed in EXPECT (an example that shows an error). Commands whose inputs cannot be
# stood in for in a few seconds are listed in SKIP with the reason; the test fails when a
# listed command is no longer on its page, so the lists stay true. tq-mkmodel(1)'s examples
# write to /tmp/ and /data/: those are run under the scratch directory's tmp/ and data/.
. "$ROOT/tests/lib/common.sh"
declare -A SKIP=(
  ["tq-convert Qwen3-30B-A3B-Q4_K_M-00001-of-00003.gguf Qwen3-30B-A3B-tq4/"]="needs a real split Q4_K_M GGUF (ggml's vectors are one file of test tensors)"
  ["tq-mkmodel --size 8g data/moe8g"]="writes 8 GB"
  ["tq-mkmodel --arch ngram --rows 1000000 --dtype f16 data/ngram"]="writes 320 MB"
  ['echo "9707,1879" | tq-run --tokenizer qwen3-dir --decode']="needs Qwen3's 151k-id tokenizer.json (ids 9707,1879)"
)
declare -A EXPECT=(
  ["tq-verify ls broken.safetensors"]=1
  ["tq-verify check damaged-split/"]=1
)
mk() { tq-mkmodel --quiet "$@" >/dev/null || fail "stand-in: tq-mkmodel $*"; }
setup() {
  case $1 in
    tq-convert)
      mk --arch qwen3_moe --seed 1 Qwen3-30B-A3B; mk --arch qwen3_moe --seed 2 in; mk --seed 3 big
      cp "$ROOT/testdata/vectors/ggml-vectors.gguf" model.gguf ;;
    tq-mkmodel) mkdir tmp data ;;
    tq-rowlayout)
      mk --arch ngram --rows 512 --seed 4 t1 && mkdir pack cache && mv t1/model.safetensors pack/ngram.safetensors
      mk --arch ngram --rows 512 --prefix model.embed_tokens --seed 5 t2 && mv t2/model.safetensors model.safetensors ;;
    tq-run)
      cp -r "$ROOT/testdata/models/qwen3-tiny" qwen3-tiny
      head -c 4096 "$ROOT/testdata/models/eval/python-doc-eval.txt" >eval.txt
      tq-convert --quiet qwen3-tiny qwen3-tiny.tq || fail "stand-in: qwen3-tiny.tq"
      # Qwen3-8B: qwen3-tiny with Qwen3's chat template beside its tokenizer
      cp -r qwen3-tiny Qwen3-8B && python3 -c 'import json, sys
open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["chat_template"])' \
        "$ROOT/testdata/tokenizers/qwen3/tokenizer_config.json" Qwen3-8B/chat_template.jinja || fail "stand-in: Qwen3-8B" ;;
    tq-split) mk --arch qwen3_moe --seed 6 model ;;
    tq-verify)
      mk --arch qwen3_moe --seed 7 model && cp model/model.safetensors model.safetensors
      cp "$ROOT/tests/fuzz/corpus/safetensors/overlap.safetensors" broken.safetensors
      mk --arch qwen3_moe --seed 8 out
      # split/: a split of model/ with a manifest; damaged-split/: a copy with one byte of an
      # expert block changed since (check names it).
      tq-split --quiet model split && tq-verify manifest --quiet split || fail "stand-in: split/"
      cp -r split damaged-split
      printf X | dd of="$(ls damaged-split/experts/*.bin | sed -n 2p)" bs=1 seek=20000 conv=notrunc status=none
      head -c 4096 "$ROOT/testdata/models/eval/python-doc-eval.txt" >held-out.txt
      tq-convert --quiet --bits 4 model model-tq4 || fail "stand-in: model-tq4/" ;;
  esac
}
seen=() total=0 bad=0
for page in "$ROOT"/man/tq-*.1; do
  tool=$(basename "$page" .1)
  awk -f "$ROOT/tests/lib/man-examples.awk" "$page" >"$tool.cmds"
  [ "$tool" = tq-mkmodel ] && sed -i 's| /tmp/| tmp/|; s| /data/| data/|' "$tool.cmds"
  [ -s "$tool.cmds" ] || fail "$tool(1) has no EXAMPLES commands"
  mkdir "$tool.d" && cd "$tool.d" || exit 1
  setup "$tool"
  n=0
  while IFS= read -r cmd; do
    n=$((n + 1))
    if [ -n "${SKIP[$cmd]+x}" ]; then seen+=("$cmd"); continue; fi
    want=${EXPECT[$cmd]:-0}
    [ -n "${EXPECT[$cmd]+x}" ] && seen+=("$cmd")
    bash -o pipefail -c "$cmd" >"out.$n" 2>"err.$n" </dev/null; rc=$?
    [ "$rc" = "$want" ] || { bad=1; echo "FAIL: $tool(1) example $n exits $rc (want $want): $cmd
$(tail -3 "err.$n")" >&2; }
    total=$((total + 1))
  done <"../$tool.cmds"
  cd .. || exit 1
done
[ "$bad" = 0 ] || fail "examples failed (above)"
for k in "${!SKIP[@]}" "${!EXPECT[@]}"; do
  printf '%s\n' "${seen[@]}" | grep -xF -- "$k" >/dev/null || fail "listed but no longer an example: $k"
done
echo "man pages: $total example commands ran as written, ${#SKIP[@]} skipped: ok"
