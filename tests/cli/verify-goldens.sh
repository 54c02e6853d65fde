# make verify as part of make check: every tool's outputs on small generated models and
# the golden decodes match testdata/golden/ byte for byte (scripts/verify). UPDATE from the
# caller's environment never reaches it: make check compares, it never rewrites a golden.
set -euo pipefail
UPDATE=0 BIN="$BIN" "$ROOT/scripts/verify"
