# Output paths: a device, a FIFO or a symbolic link given as an output file is refused with
# exit 2 and left as it was (nothing opened, nothing replaced); "-" sends a bundle to
# standard output, and tq-verify check - reads one from standard input.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 4 m
run tq-convert --quiet m c
# A character device: as root a scratch node of /dev/null's numbers (a regression would
# then replace only that), otherwise /dev/null itself (which a non-root rename cannot touch).
if [ "$(id -u)" = 0 ] && mknod nulldev c 1 3 2>/dev/null; then dev=$PWD/nulldev; else dev=/dev/null; fi
expect_exit 2 tq-verify pack --quiet c -o "$dev" >dev.msg
sed "s|$dev|DEVICE|" dev.msg
[ -c "$dev" ] || fail "$dev is no longer a character device"
mkfifo fifo
expect_exit 2 tq-verify pack --quiet c -o fifo
[ -p fifo ] || fail "the FIFO was replaced"
echo old >target
ln -s target link
expect_exit 2 tq-verify pack --quiet c -o link
[ -L link ] && [ "$(cat target)" = old ] || fail "the link or its target changed"
mkdir adir
expect_exit 2 tq-verify pack --quiet c -o adir
ls | grep -q partial && fail "a partial output was left: $(ls)"
# "-": the bundle on standard output, byte for byte what -o FILE writes; check - reads it.
tq-verify pack --quiet c -o c.tar.zst || fail "pack -o FILE"
tq-verify pack c -o - >stdout.tar.zst || fail "pack -o -"
cmp c.tar.zst stdout.tar.zst || fail "pack -o - differs from pack -o FILE"
[ ! -e ./- ] || fail "pack -o - wrote a file named -"
tq-verify pack --quiet c -o - | tq-verify check - >check.out || fail "pack -o - | check -"
grep -q "^-: OK" check.out || fail "check -: $(cat check.out)"
echo "output targets: device, FIFO, link, directory refused; - streams"
