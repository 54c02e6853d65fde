# Free space before a long write (issue 32): tq-convert, tq-split and tq-rowlayout compare the
# exact output size (what --dry-run lists; the row file's header + records) with the space
# available on the output's filesystem (statvfs of its parent directory), tq-mkmodel its
# tensor bytes (a lower bound), and refuse, exit 1, naming both numbers and the filesystem,
# before anything is written; --force-space starts anyway. Checked through TQ_FAKE_FREE_BYTES
# (the test hook standing in for statvfs's answer, common/space.c) and, when this test runs
# as root and may mount, on a real 1 MiB tmpfs.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 5 m
run tq-convert --quiet m c
need_c=$(tq-convert --dry-run --json --no-quantize m c2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["output_bytes"])')
need_s=$(tq-split --dry-run --json c s2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["output_bytes"])')
refused() { # OUT MESSAGE CMD...: exit 1, the message, nothing written
  local out=$1 msg=$2
  shift 2
  expect_msg 1 "$msg" "$@"
  [ ! -e "$out" ] && ! ls -d "$out".partial-* >/dev/null 2>&1 || fail "$*: wrote $out"
}
# one byte short of the exact size: refused; the exact size: written
TQ_FAKE_FREE_BYTES=$((need_c - 1))B refused c2 "c2: not enough free space: the output needs .* ($need_c bytes), the filesystem of . has .* ($((need_c - 1)) bytes) available; free some, write elsewhere, or give --force-space" \
  tq-convert --no-quantize m c2
TQ_FAKE_FREE_BYTES=${need_c}B run tq-convert --quiet --no-quantize m c2
TQ_FAKE_FREE_BYTES=1K refused s2 "s2: not enough free space: the output needs .* ($need_s bytes)" tq-split c s2
TQ_FAKE_FREE_BYTES=${need_s}B run tq-split --quiet c s2
# --force-space starts anyway (here the space is really there)
TQ_FAKE_FREE_BYTES=1K run tq-convert --quiet --force-space --no-quantize m c3
TQ_FAKE_FREE_BYTES=1K run tq-split --quiet --force-space c s3
cmp c2/model.safetensors c3/model.safetensors || fail "--force-space changed the output"
# it never changes an output's bytes, so provenance leaves it out, as it does --force
cmp c2/tq-provenance.json c3/tq-provenance.json || fail "--force-space recorded in provenance"
expect_msg 2 "--force-space goes with a split" tq-split --plan --ram 16G --force-space c
# tq-rowlayout: the row file's exact size (its receipt's file_bytes) against the free space
run tq-mkmodel --quiet --arch ngram ng
run tq-rowlayout --quiet --json ng/model.safetensors --out r0.rows > r0.json
need_r=$(jget r0.json file_bytes)
TQ_FAKE_FREE_BYTES=$((need_r - 1))B refused r.rows "r.rows: not enough free space: the output needs .* ($need_r bytes)" \
  tq-rowlayout ng/model.safetensors --out r.rows
TQ_FAKE_FREE_BYTES=${need_r}B run tq-rowlayout --quiet ng/model.safetensors --out r.rows
TQ_FAKE_FREE_BYTES=1K run tq-rowlayout --quiet --force-space ng/model.safetensors --out r2.rows
cmp r.rows r2.rows || fail "tq-rowlayout --force-space changed the row file"
# tq-mkmodel: the tensor bytes of --size 8g (8 GB) against the free space, before generating
TQ_FAKE_FREE_BYTES=1G refused big "big: not enough free space: the output needs 7.91 GiB" tq-mkmodel --size 8g big
TQ_FAKE_FREE_BYTES=1K run tq-mkmodel --quiet --force-space --seed 5 m2
cmp m/model.safetensors m2/model.safetensors || fail "tq-mkmodel --force-space changed the model"
# a real small filesystem
if [ "$(id -u)" = 0 ] && mkdir small && mount -t tmpfs -o size=1M tmpfs small 2>/dev/null; then
  trap 'umount small' EXIT
  [ "$need_c" -gt 1048576 ] || fail "the test model's plain copy ($need_c bytes) fits 1 MiB"
  refused small/c "small/c: not enough free space: the output needs .* ($need_c bytes), the filesystem of small has" \
    tq-convert --no-quantize m small/c
  echo "refused on a 1 MiB tmpfs too"
else
  echo "no tmpfs (not root or no mount): TQ_FAKE_FREE_BYTES only"
fi
