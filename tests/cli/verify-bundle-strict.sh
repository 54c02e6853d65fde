# A bundle is what man tq-formats(5) (Bundles) allows and nothing else: a tar archive
# compressed with zstd once, holding regular files only. An uncompressed tar (a file or standard
# input), a twice-compressed one, and a directory entry were accepted by check and unpack;
# each is refused now (exit 1), and unpack leaves nothing. Consistency test (tq-formats(5)).
set -u
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch llama --size tiny --seed 2 m
run tq-verify pack --quiet m -o a.tar.zst
run tq-verify check --quiet a.tar.zst
zstd -q -d -c a.tar.zst > a.tar || fail "zstd -d"
zstd -q -c a.tar.zst > twice.tar.zst || fail "zstd"
expect_refused "a.tar: not a .tar.zst bundle: a tar archive not compressed" - tq-verify check a.tar
expect_refused "twice.tar.zst: not a .tar.zst bundle: a tar archive compressed more than once" - \
  tq-verify check twice.tar.zst
for b in a.tar twice.tar.zst; do
  expect_refused "$b: not a .tar.zst bundle" u tq-verify unpack "$b" -o u
done
expect_refused "-: not a .tar.zst bundle: a tar archive not compressed" - tq-verify check - < a.tar
# a directory entry after the two indexes, the rest as packed
python3 - <<'EOF' || fail "cannot write d.tar"
import tarfile
src = tarfile.open("a.tar")
with tarfile.open("d.tar", "w", format=tarfile.PAX_FORMAT) as out:
    ms = src.getmembers()
    for m in ms[:2]:
        out.addfile(m, src.extractfile(m))
    d = tarfile.TarInfo("sub")
    d.type, d.mode = tarfile.DIRTYPE, 0o755
    out.addfile(d)
    for m in ms[2:]:
        out.addfile(m, src.extractfile(m))
EOF
zstd -q -f d.tar -o d.tar.zst || fail "zstd"
tq-verify check d.tar.zst > out 2>err && fail "check passed a bundle with a directory entry"
grep -qx "sub/: directory entry refused: a bundle holds regular files only" out || fail "no refusal: $(cat out err)"
grep -q "1 problem" out || fail "other problems: $(cat out)"
expect_refused "1 problem(s); nothing unpacked" ud tq-verify unpack d.tar.zst -o ud
exit 0
