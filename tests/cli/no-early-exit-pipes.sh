# Lint: no shell script that sets pipefail pipes into a reader that may exit before its writer
# is done (head, grep -q/-m/-l, sed ...q): the writer then dies of SIGPIPE and, under pipefail,
# the whole pipeline fails with 141, but only when the reader wins the race, so on an idle
# machine and not on a loaded one (issue 32: make demo failed three times in three). Read to
# the end instead: sed -n 1,8p, grep PATTERN >/dev/null, awk 'n++ < 60'.
. "$ROOT/tests/lib/common.sh"
hits=$PWD/hits
cd "$ROOT" || exit 1
# A reader that may exit early: head; grep with -q/-m/-l (or --quiet/--silent/--max-count/
# --files-with-matches) among its options; sed with a q command.
early='\|[[:space:]]*(head([[:space:]]|$)|grep([[:space:]]+-[^[:space:]]*)*[[:space:]]+-[a-zA-Z]*[qml]|grep[^|]*--(quiet|silent|max-count|files-with-matches)|sed[^|]*[0-9/][[:space:]]*q)'
bad=0 n=0
while IFS= read -r f; do
  [ "$f" = tests/cli/no-early-exit-pipes.sh ] && continue
  grep -q 'pipefail' "$f" || continue
  n=$((n + 1))
  if grep -nE "$early" "$f" >"$hits"; then
    sed "s|^|$f:|" "$hits"; bad=1
  fi
done < <(grep -rlE '^#!.*(ba)?sh|^set -|^\. ' scripts tests bench .ci --include='*' 2>/dev/null |
         grep -v -e '^tests/fuzz/' -e '\.exact$' | LC_ALL=C sort)
[ "$n" -gt 10 ] || fail "found only $n scripts that set pipefail: the file search is broken"
[ "$bad" = 0 ] || fail "pipes into an early-exiting reader under pipefail (above): read to the end instead"
echo "no early-exiting readers under pipefail in $n scripts: ok"
