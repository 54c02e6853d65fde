# Every file of tests/data/malformed-gguf makes tq-verify ls exit 1 with one exact message
# (collected on stdout, compared with gguf_malformed.stdout.exact); nothing crashes.
set -u
export LC_ALL=C  # glob order
for f in "$ROOT"/tests/data/malformed-gguf/*.gguf; do
  b=$(basename "$f")
  cp "$f" "$b"
  tq-verify ls "$b" >out 2>err
  rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "$b: exit status $rc, expected 1" >&2
    cat err >&2
    exit 1
  fi
  cat err
done
