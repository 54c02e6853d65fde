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
# Every other output FILE option, with and without --force: tq-rowlayout --out and the file
# --extract writes into --to, tq-run --logits, tq-verify pack -o --force. Exit 2, the target
# named for what it is, left as it was.
run tq-mkmodel --quiet --arch ngram --seed 4 ng
run tq-rowlayout --quiet ng/model.safetensors --out ng.rows
mkdir -p emptydir
same_targets() {
  [ -c "$dev" ] && [ -p fifo ] && [ -L link ] && [ "$(cat target)" = old ] && [ -L dirlink ] && [ -z "$(ls -A emptydir)" ] ||
    fail "$1: a target changed: $(ls -l)"
  [ -z "$(ls | grep partial)" ] || fail "$1: a partial output was left: $(ls)"
}
ln -s emptydir dirlink
nfile=0
for o in "$dev" fifo link; do
  for f in "" --force; do
    expect_msg 2 "not a regular file" tq-rowlayout --quiet ng/model.safetensors --out "$o" $f
    expect_msg 2 "not a regular file" tq-run m --tokens 1,2 --max-tokens 2 --logits "$o" $f
    rm -rf xd; mkdir xd; ln -s "$([ "$o" = "$dev" ] || echo "$PWD/")$o" xd/model.safetensors
    expect_msg 2 "not a regular file" tq-rowlayout --quiet --extract ng.rows --to xd $f
    [ -L xd/model.safetensors ] && [ "$(ls xd)" = model.safetensors ] || fail "--extract replaced xd/model.safetensors"
    same_targets "$o $f"
    nfile=$((nfile + 3))
  done
  expect_msg 2 "not a regular file" tq-verify pack --quiet --force c -o "$o"
  same_targets "pack --force $o"
done
# Every OUTPUT_DIR: a device, a FIFO, a symbolic link (to a directory or to a file) is
# refused with exit 2 as not a directory, with and without --force, dry runs too.
ndir=0
for o in "$dev" fifo link dirlink; do
  for f in "" --force; do
    expect_msg 2 "not a directory" tq-mkmodel --quiet --seed 4 $f "$o"
    expect_msg 2 "not a directory" tq-convert --quiet $f m "$o"
    expect_msg 2 "not a directory" tq-convert --quiet --dry-run $f m "$o"
    expect_msg 2 "not a directory" tq-split --quiet $f c "$o"
    expect_msg 2 "not a directory" tq-split --quiet --dry-run $f c "$o"
    same_targets "OUTPUT_DIR $o $f"
    ndir=$((ndir + 5))
  done
done
run tq-split --quiet c s
for o in "$dev" fifo link dirlink; do
  expect_msg 2 "not a directory" tq-split --quiet --join s "$o"
  expect_msg 2 "not a directory" tq-split --quiet --join --force s "$o"
  same_targets "join $o"
  ndir=$((ndir + 2))
done
echo "other output files: $nfile refusals; output directories: $ndir refusals"
# "-": the bundle on standard output, byte for byte what -o FILE writes; check - reads it.
tq-verify pack --quiet c -o c.tar.zst || fail "pack -o FILE"
tq-verify pack c -o - >stdout.tar.zst || fail "pack -o -"
cmp c.tar.zst stdout.tar.zst || fail "pack -o - differs from pack -o FILE"
[ ! -e ./- ] || fail "pack -o - wrote a file named -"
tq-verify pack --quiet c -o - | tq-verify check - >check.out || fail "pack -o - | check -"
grep -q "^-: OK" check.out || fail "check -: $(cat check.out)"
# "-" when standard output is a terminal (a pty from script(1)): binary data is refused with
# exit 2 and nothing is written, as zstd does; a pipe is what "-" is for
if command -v script >/dev/null; then
  for cmdline in "tq-verify pack --quiet c -o -" "tq-run --quiet --tokens 1,2 --logits - m"; do
    rc=0; script -qec "$cmdline" /dev/null >tty.out 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "$cmdline on a terminal: exit $rc ($(cat tty.out))"
    grep -q "standard output is a terminal; refusing to write binary data there" tty.out ||
      fail "$cmdline on a terminal: $(cat tty.out)"
    [ "$(wc -c <tty.out)" -lt 400 ] || fail "$cmdline wrote data to the terminal"
  done
  ls | grep -q partial && fail "a partial output was left: $(ls)"
fi
echo "output targets: device, FIFO, link, directory refused; - streams"
