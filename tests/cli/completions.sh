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
# zsh: each tool's (and tq-verify command's) _arguments offer exactly its table's long and
# short options, and every tool and command has its section.
python3 - "$C/zsh/_tq" <<'PY' || fail "zsh completions differ from the option tables"
import os, re, subprocess, sys
text = open(sys.argv[1]).read()
def offered(block):
    longs = set(re.findall(r"'--([A-Za-z0-9-]+)\[", block)) | set(re.findall(r"\{-[A-Za-z0-9],--([A-Za-z0-9-]+)\}", block))
    return longs, set(re.findall(r"\{-([A-Za-z0-9]),--", block))
def table(*argv):
    out = subprocess.run(argv, env=dict(os.environ, TQ_CLI_TABLE="1"), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL).stdout
    rows = [l.split("\t") for l in out.splitlines() if l]
    return {r[0] for r in rows}, {r[1] for r in rows if r[1] != "-"}
def commands():
    h = subprocess.run(["tq-verify", "--help"], capture_output=True, text=True).stdout
    return re.findall(r"^  ([a-z-]+) ", h.split("Commands:")[1].split("\n\n")[0], re.M)
bad, seen = [], {}
parts = re.split(r"\n  (tq-[a-z]+)\)\n", text)
for i in range(1, len(parts), 2):
    tool, body = parts[i], parts[i + 1]
    if tool == "tq-verify":
        cmds = re.split(r"\n    ([a-z-]+)\)\n", body)
        seen[tool] = [cmds[k] for k in range(1, len(cmds), 2)]
        blocks = [((tool, cmds[k]), cmds[k + 1]) for k in range(1, len(cmds), 2)]
    else:
        seen[tool] = []
        blocks = [((tool,), body)]
    for argv, block in blocks:
        want, got = table(*argv), offered(block)
        if want != got:
            bad.append(f"{' '.join(argv)}: zsh offers {sorted(got[0] ^ want[0])} {sorted(got[1] ^ want[1])} unlike the table")
tools = ["tq-convert", "tq-mkmodel", "tq-rowlayout", "tq-run", "tq-split", "tq-verify"]
if sorted(seen) != tools or sorted(seen.get("tq-verify", [])) != sorted(commands()):
    bad.append(f"sections {seen}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
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
