# The bash and zsh completions (scripts/completions, made from each tool's option table)
# offer every option of every tool and tq-verify command, the values of choice options, and
# file names for operands and path options.
. "$ROOT/tests/lib/common.sh"
C=$BUILD/completions
[ -s "$C/zsh/_tq" ] || fail "no $C/zsh/_tq (make all makes the completions)"
# complete TOOL WORD...: the words bash would offer for the last WORD
complete_words() {
  bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _${1//-/_}; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$C/bash/$1" "$@"
}
n=0
for t in convert mkmodel rowlayout run split verify; do
  tool=tq-$t
  if [ $t = verify ]; then
    cmds=$(tq-verify --help | sed -n '/^Commands:/,/^$/{/^  [a-z]/s/^  \([a-z-]*\).*/\1/p}')
    [ "$(complete_words tq-verify '' | grep -v -- '^-' | sort)" = "$(sort <<<"$cmds")" ] || fail "tq-verify commands"
  else
    cmds=-
  fi
  for c in $cmds; do
    [ "$c" = - ] && c=
    while IFS=$'\t' read -r name short value choices help; do
      got=$(complete_words $tool $c "--$name")
      grep -qx -- "--$name" <<<"$got" || fail "$tool $c: --$name not offered ($got)"
      if [ "$short" != - ]; then
        grep -qx -- "-$short" <<<"$(complete_words $tool $c "-$short")" || fail "$tool $c: -$short not offered"
      fi
      if [ "$value" = choice ]; then
        [ "$(complete_words $tool $c "--$name" '' | tr '\n' ' ')" = "$choices " ] ||
          fail "$tool $c --$name: choices $(complete_words $tool $c "--$name" '' | tr '\n' ' ') != $choices"
      fi
      n=$((n + 1))
    done < <(TQ_CLI_TABLE=1 $tool $c)
  done
done
# Operands and path options complete file names; numbers complete nothing.
mkdir -p dir && touch dir/model.safetensors
[ "$(complete_words tq-convert dir/mo)" = dir/model.safetensors ] || fail "operand file names"
[ "$(complete_words tq-verify pack dir/mo)" = dir/model.safetensors ] || fail "tq-verify operand file names"
[ -z "$(complete_words tq-convert --threads '')" ] || fail "--threads offered words"
[ "$(complete_words tq-convert --sc)" = --scale ] || fail "prefix completion"
# zsh: the file parses, and compinit registers _tq for every tool.
if command -v zsh >/dev/null; then
  zsh -n "$C/zsh/_tq" || fail "zsh: _tq does not parse"
  got=$(zsh -f -c 'fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -d "$2"; for t in tq-convert tq-mkmodel tq-rowlayout tq-run tq-split tq-verify; do print -r -- "$t=$_comps[$t]"; done' _ "$C/zsh" "$PWD/zcompdump")
  for t in convert mkmodel rowlayout run split verify; do
    grep -qx "tq-$t=_tq" <<<"$got" || fail "zsh: tq-$t not bound to _tq ($got)"
  done
else
  echo "zsh not installed: zsh completion not loaded (scripts/install-deps installs it)" >&2
fi
echo "completions: $n options offered"
