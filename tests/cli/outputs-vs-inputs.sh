# Output paths against input paths (issue 24): an output that is an input (same file under
# any name), lies inside an input directory or would hold an input is refused before
# anything is written: exit 2, one message naming both paths, the input untouched.
set -u
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 5 m || fail mkmodel
tq-split --quiet m s || fail split
tq-verify pack --quiet m -o b.tar.zst || fail pack
tq-mkmodel --quiet --arch ngram --rows 300 ng || fail "mkmodel ngram"
mkdir rx && tq-rowlayout ng/model.safetensors --out rx/model.safetensors --quiet || fail rowlayout
before=$( (tree_hash m; tree_hash s; tree_hash b.tar.zst; tree_hash ng; tree_hash rx) )

conflict() { # conflict TOOL OUT IN ARGS...: exit 2 and a message naming OUT and IN
  local tool=$1 out=$2 in=$3; shift 3
  "$tool" "$@" >/dev/null 2>err; local rc=$?
  [ "$rc" = 2 ] || fail "$tool $*: exit $rc, expected 2 ($(cat err))"
  grep -q "^$tool: " err && grep -qF -- "$out" err && grep -qF -- "$in" err ||
    fail "$tool $*: message does not name both $out and $in: $(cat err)"
  grep -Eq "is the input|inside the input directory|would hold the input" err || fail "$tool $*: $(cat err)"
  ls -d "$out".partial-* 2>/dev/null && fail "$tool $*: a partial output was made"
  echo "refused: $tool $*"
}
conflict tq-convert m/q m --quiet m m/q
conflict tq-convert m m --quiet --force m m
conflict tq-convert . m/model.safetensors --quiet --force m/model.safetensors .
conflict tq-split m/sp m --quiet m m/sp
conflict tq-split ./s/../s/j s --quiet --join s ./s/../s/j
conflict tq-run m/pinned.safetensors m m --tokens 1,2 --max-tokens 2 --quiet --logits m/pinned.safetensors
conflict tq-run s/experts/x.f32 s s --tokens 1,2 --max-tokens 2 --quiet --logits s/experts/x.f32
ln -s m mlink
conflict tq-verify mlink/x.tar.zst m pack --quiet m -o mlink/x.tar.zst
conflict tq-verify b.tar.zst b.tar.zst unpack --quiet b.tar.zst -o b.tar.zst
conflict tq-verify . b.tar.zst unpack --quiet b.tar.zst -o .
conflict tq-verify m/g.json m golden --quiet m --golden m/g.json --update --tokens 1,2 --max-tokens 2
ln ng/model.safetensors hard.safetensors
conflict tq-rowlayout hard.safetensors ng/model.safetensors ng/model.safetensors --out hard.safetensors --quiet
# --extract rebuilds model.safetensors: into the row file's own directory it would be the row file
conflict tq-rowlayout rx/model.safetensors rx/model.safetensors --extract rx/model.safetensors --to rx --quiet

# tq-run --logits against its other inputs: the prompt file and the tokenizer directory
echo "hello" > p.txt && mkdir tk && echo '{}' > tk/tokenizer.json
. "$ROOT/tests/lib/keys.sh"
make_key k ed25519
ln m/model.safetensors hard.bin
before2=$( (tree_hash k.pem; tree_hash p.txt; tree_hash tk) )
conflict tq-run p.txt p.txt m --prompt-file p.txt --max-tokens 2 --quiet --logits p.txt
conflict tq-run tk/tokenizer.json tk m --tokenizer tk --tokens 1,2 --max-tokens 2 --quiet --logits tk/tokenizer.json
# tq-verify sign: its signature goes inside the signed directory by design (left out of what
# it signs), but never over the key, a signed file (under any name) or a non-signature there
conflict tq-verify k.pem k.pem sign --quiet m --key k.pem --out k.pem
conflict tq-verify m/model.safetensors m sign --quiet m --key k.pem --out m/model.safetensors
conflict tq-verify m/config.json m sign --quiet m --key k.pem --out m/config.json
# (--force: an existing output may be replaced, never an input under another name)
conflict tq-verify hard.bin m/model.safetensors sign --quiet --force m --key k.pem --out hard.bin
conflict tq-verify . m sign --quiet m --key k.pem --out .
conflict tq-verify ng/model.safetensors ng/model.safetensors sign --quiet ng/model.safetensors --key k.pem --out ng/model.safetensors

[ "$( (tree_hash m; tree_hash s; tree_hash b.tar.zst; tree_hash ng; tree_hash rx) )" = "$before" ] &&
  [ "$( (tree_hash k.pem; tree_hash p.txt; tree_hash tk) )" = "$before2" ] || fail "an input changed"
# an output next to the input (sharing a name prefix) is fine
tq-convert --quiet m m2 || fail "m2 next to m refused"
tq-run m --tokens 1,2 --max-tokens 2 --quiet --logits m.f32 >/dev/null || fail "--logits next to the model refused"
# the signature inside the directory: model.sig, or another name holding an earlier signature
# (replaced with --force, the one rule for an existing output)
tq-verify sign --quiet m --key k.pem && tq-verify sign --quiet --force m --key k.pem || fail "DIR/model.sig refused"
tq-verify sign --quiet m --key k.pem --out m/other.sig &&
  tq-verify sign --quiet --force m --key k.pem --out m/other.sig || fail "re-signing into m/other.sig refused"
tq-verify verify --quiet m --pubkey k.pub --sig m/other.sig || fail "m/other.sig does not verify"
exit 0
