# One rule for every tool's output: an existing non-empty output (directory or file) is
# refused, exit 1, with a message saying --force, and left as it was; with --force it is
# replaced whole. tq-mkmodel, tq-convert, tq-split (and --join), tq-rowlayout (--out and the
# file --extract writes), tq-verify pack -o, unpack -o, sign (DIR/model.sig or --out FILE) and
# tq-run --logits.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 1 m
run tq-mkmodel --quiet --arch ngram --seed 2 ng
# refused: NAME TOOL ARGS... (NAME is the output; its bytes must not change)
refused() {
  local out=$1 before
  shift
  before=$(find "$out" -type f -exec cat {} + | sha256sum)
  expect_msg 1 "use --force to replace it" "$@"
  [ "$(find "$out" -type f -exec cat {} + | sha256sum)" = "$before" ] || fail "$*: changed $out"
  ! compgen -G "$out.partial-*" >/dev/null || fail "$*: left a partial output"
}
for d in dm dc ds dj; do mkdir $d && echo mine > $d/notes.txt; done
refused dm tq-mkmodel --quiet --seed 3 dm
refused dc tq-convert --quiet m dc
refused ds tq-split --quiet m ds
run tq-split --quiet m s
refused dj tq-split --quiet --join s dj
refused dc tq-convert --dry-run m dc
refused ds tq-split --dry-run m ds
run tq-convert --quiet --force m dc
[ ! -e dc/notes.txt ] && [ -f dc/model.safetensors ] || fail "convert --force did not replace dc"
run tq-split --quiet --force m ds
[ ! -e ds/notes.txt ] && [ -f ds/split.json ] || fail "split --force did not replace ds"
run tq-split --quiet --join --force s dj
[ ! -e dj/notes.txt ] && [ -f dj/model.safetensors ] || fail "join --force did not replace dj"
# tq-mkmodel --force replaces its own earlier output, never a directory holding other files
run tq-mkmodel --quiet --seed 3 mk
refused mk tq-mkmodel --quiet --seed 4 mk
run tq-mkmodel --quiet --force --seed 4 mk
expect_msg 1 "which tq-mkmodel does not write" tq-mkmodel --quiet --force --seed 4 dm
[ "$(cat dm/notes.txt)" = mine ] || fail "mkmodel --force touched a foreign directory"
# files
run tq-rowlayout --quiet ng/model.safetensors --out r.rows
cp r.rows r0.rows
refused r.rows tq-rowlayout --quiet ng/model.safetensors --out r.rows --page-align 4096
run tq-rowlayout --quiet --force ng/model.safetensors --out r.rows --page-align 4096
! cmp -s r.rows r0.rows || fail "rowlayout --force did not replace r.rows"
mkdir ex && echo old > ex/model.safetensors
refused ex tq-rowlayout --quiet --extract r0.rows --to ex
run tq-rowlayout --quiet --force --extract r0.rows --to ex
cmp -s ex/model.safetensors ng/model.safetensors || fail "rowlayout --extract --force"
echo old > b.tar.zst
refused b.tar.zst tq-verify pack --quiet m -o b.tar.zst
run tq-verify pack --quiet --force m -o b.tar.zst
run tq-verify check --quiet b.tar.zst
# unpack: a non-empty DIR refused, an empty one taken, --force replaces it whole
mkdir up && echo mine > up/notes.txt
refused up tq-verify unpack --quiet b.tar.zst -o up
run tq-verify unpack --quiet --force b.tar.zst -o up
[ ! -e up/notes.txt ] || fail "unpack --force left a file of the old directory"
run tq-verify check --quiet up
mkdir up-empty
run tq-verify unpack --quiet b.tar.zst -o up-empty
run tq-verify check --quiet up-empty
# a bundle with a problem leaves the old DIR as it was, --force or not
mkdir up2 && echo mine > up2/notes.txt
head -c 3000 b.tar.zst > cut.tar.zst
expect_msg 1 "cut.tar.zst" tq-verify unpack --quiet --force cut.tar.zst -o up2
[ "$(cat up2/notes.txt)" = mine ] || fail "unpack --force of a bad bundle touched up2"
! compgen -G "up2.partial-*" >/dev/null || fail "unpack --force of a bad bundle left a partial"
: > empty.tar.zst
run tq-verify pack --quiet m -o empty.tar.zst
# sign: DIR/model.sig and an --out FILE, each refused when there, replaced with --force
. "$ROOT/tests/lib/keys.sh"
make_key k ed25519
run tq-verify sign --quiet m --key k.pem
refused m/model.sig tq-verify sign --quiet m --key k.pem
run tq-verify sign --quiet --force m --key k.pem
run tq-verify verify --quiet m --pubkey k.pub
echo old > m.sig
refused m.sig tq-verify sign --quiet m --key k.pem --out m.sig
run tq-verify sign --quiet --force m --key k.pem --out m.sig
run tq-verify verify --quiet m --pubkey k.pub --sig m.sig
: > empty.sig
run tq-verify sign --quiet m --key k.pem --out empty.sig
run tq-verify verify --quiet m --pubkey k.pub --sig empty.sig
echo old > l.f32
refused l.f32 tq-run m --tokens 1,2 --max-tokens 2 --quiet --logits l.f32
run tq-run m --tokens 1,2 --max-tokens 2 --quiet --force --logits l.f32 > /dev/null
[ "$(stat -c %s l.f32)" -gt 4 ] || fail "run --force did not replace l.f32"
echo "every tool refuses an existing output without --force and replaces it with it"
