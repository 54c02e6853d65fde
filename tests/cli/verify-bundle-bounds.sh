# Bundles are bounded as they stream: past the files its manifest lists (and the two indexes
# and model.sig), a bundle may hold at most 10000 more entries; the next one stops check and
# unpack at once (exit 1 naming the bundle and the bound), so a tar.zst with 10^5 extra
# entries is refused in seconds, not read to the end, and unpack leaves nothing. Up to the
# bound, extra entries are reported one by one as before.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch llama --size tiny --seed 2 m
run tq-verify pack --quiet m -o a.tar.zst
# a.tar.zst's entries, then N empty files extra/NNNNNN
extend() {
  zstd -q -d -c a.tar.zst > a.tar || fail "zstd -d"
  python3 - "$1" <<'PY' || fail "cannot extend the bundle"
import io, sys, tarfile
src = tarfile.open("a.tar")
with tarfile.open("b.tar", "w", format=tarfile.PAX_FORMAT) as out:
    for m in src.getmembers():
        out.addfile(m, src.extractfile(m))
    for i in range(int(sys.argv[1])):
        ti = tarfile.TarInfo("extra/%06d" % i)
        out.addfile(ti, io.BytesIO(b""))
PY
  zstd -q -f b.tar -o b.tar.zst || fail "zstd"
}
extend 100000
t0=$(date +%s)
expect_refused "b.tar.zst: more than 10000 entries besides the 5 files its manifest lists: not a bundle tq wrote" \
  - tq-verify check b.tar.zst
expect_refused "more than 10000 entries besides" u tq-verify unpack b.tar.zst -o u
[ $(($(date +%s) - t0)) -lt 20 ] || fail "two refusals of a 10^5-entry bundle took $(($(date +%s) - t0)) s"
# at the bound: every extra entry reported, no stop
extend 10000
tq-verify check b.tar.zst >out 2>err; rc=$?
[ "$rc" -eq 1 ] || fail "check of 10000 extras: exit $rc: $(head -c 300 err)"
[ "$(grep -c 'extra/.*not listed in the manifest' out)" -eq 10000 ] || fail "not 10000 extras reported: $(tail -2 out)"
echo "a bundle with too many entries stops at the bound"
