# make verify as part of make check: every tool's outputs on small generated models and
# the golden decodes match testdata/golden/ byte for byte (scripts/verify).
set -euo pipefail
BIN="$BIN" "$ROOT/scripts/verify"
