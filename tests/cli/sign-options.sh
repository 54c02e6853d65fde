# tq-verify sign and verify: keys (ECDSA P-256/P-384/P-521 and Ed25519 sign and verify;
# RSA, encrypted and public keys are refused), --ignore-paths, --allow-symlinks, --out and
# the default signature of a single-file model, and what is left out by default.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
mkdir m m/sub m/.git
echo w > m/w.bin; echo c > m/config.json; echo r > m/README.md; echo s > m/sub/x; echo g > m/.git/HEAD
echo a > m/.gitattributes; echo sums > m/SHA256SUMS
payload() { python3 -c 'import base64, json, sys; print(base64.b64decode(json.load(open(sys.argv[1]))["dsseEnvelope"]["payload"]).decode())' "$1"; }
names() { payload "$1" | python3 -c 'import json, sys; s = json.load(sys.stdin); print(" ".join(r["name"] for r in s["predicate"]["resources"]))'; }
ignored() { payload "$1" | python3 -c 'import json, sys; s = json.load(sys.stdin); print(" ".join(s["predicate"]["serialization"].get("ignore_paths", [])))'; }

. "$ROOT/tests/lib/keys.sh"
make_key p256 prime256v1
make_key p384 secp384r1
make_key p521 secp521r1
make_key ed ed25519
for k in p256 p384 p521 ed; do
  run tq-verify sign --quiet m --key $k.pem --out $k.sig
  run tq-verify verify --quiet m --pubkey $k.pub --sig $k.sig
done
# Left out by default: the git files and directories, the manifests, the signature itself.
run tq-verify sign --quiet m --key p256.pem
[ "$(names m/model.sig)" = "README.md config.json sub/x w.bin" ] || fail "signed: $(names m/model.sig)"
[ "$(ignored m/model.sig)" = ".git .gitattributes .github .gitignore SHA256SUMS model.sig tq-manifest.json" ] ||
  fail "ignore_paths: $(ignored m/model.sig)"
run tq-verify verify --quiet m --pubkey p256.pub
tq-verify sign --json --force m --key p256.pem > s.json || fail "sign --json"
[ "$(jget s.json files)" = 4 ] && [ "$(jget s.json key_type)" = ecdsa-p256 ] && [ "$(jget s.json signature)" = m/model.sig ] ||
  fail "sign --json: $(cat s.json)"
# --ignore-paths (relative to the current directory) and the --no-ignore-* switches.
run tq-verify sign --quiet m --key p256.pem --ignore-paths m/README.md --ignore-paths m/sub/ --out i.sig
[ "$(names i.sig)" = "config.json w.bin" ] || fail "--ignore-paths: $(names i.sig)"
[ "$(ignored i.sig)" = ".git .gitattributes .github .gitignore README.md SHA256SUMS model.sig sub tq-manifest.json" ] ||
  fail "--ignore-paths: ignore_paths $(ignored i.sig)"
run tq-verify verify --quiet m --pubkey p256.pub --sig i.sig
echo changed > m/README.md
run tq-verify verify --quiet m --pubkey p256.pub --sig i.sig
tq-verify verify m --pubkey p256.pub > out; [ $? = 1 ] && grep -q '^README.md: sha256 ' out || fail "README.md change not seen"
echo r > m/README.md
run tq-verify sign --quiet m --key p256.pem --no-ignore-git-paths --no-ignore-manifests --out all.sig
[ "$(names all.sig)" = ".git/HEAD .gitattributes README.md SHA256SUMS config.json sub/x w.bin" ] || fail "--no-ignore-*: $(names all.sig)"
[ "$(ignored all.sig)" = "model.sig" ] || fail "--no-ignore-*: ignore_paths $(ignored all.sig)" # m/model.sig exists
run tq-verify verify --quiet m --pubkey p256.pub --sig all.sig
# Symbolic links are refused unless --allow-symlinks; verify follows the signature's choice.
ln -s ../outside.bin m/link.bin; echo o > outside.bin
expect_msg 1 "m/link.bin: symbolic link" tq-verify sign m --key p256.pem --out l.sig
[ ! -e l.sig ] || fail "a refused sign wrote l.sig"
run tq-verify sign --quiet m --key p256.pem --allow-symlinks --out l.sig
[ "$(names l.sig)" = "README.md config.json link.bin sub/x w.bin" ] || fail "--allow-symlinks: $(names l.sig)"
run tq-verify verify --quiet m --pubkey p256.pub --sig l.sig
expect_msg 1 "m/link.bin: symbolic link" tq-verify verify m --pubkey p256.pub
rm m/link.bin
# A file name that is not UTF-8 cannot be written in a signature.
mkdir n && echo x > "n/$(printf 'bad\377name')"
expect_msg 1 "the file name is not UTF-8" tq-verify sign n --key p256.pem
# A single file: resource ".", default signature model.sig next to it.
mkdir f && echo weights > f/one.bin
run tq-verify sign --quiet f/one.bin --key ed.pem
[ -f f/model.sig ] && [ "$(names f/model.sig)" = "." ] || fail "single file: $(names f/model.sig)"
run tq-verify verify --quiet f/one.bin --pubkey ed.pub
expect_msg 1 "signs a single file, but f is a directory" tq-verify verify f --pubkey ed.pub
expect_msg 1 "signs a directory" tq-verify verify m/w.bin --pubkey p256.pub --sig m/model.sig
expect_msg 2 "would replace the model file" tq-verify sign f/one.bin --key ed.pem --out f/one.bin
# Keys that are not model-signing keys.
make_key rsa rsa
expect_msg 1 "rsa.pem: a RSA key" tq-verify sign m --key rsa.pem --out x.sig
openssl pkey -in p256.pem -aes128 -passout pass:secret -out enc.pem || fail "openssl: encrypt"
expect_msg 1 "enc.pem: the private key is encrypted" tq-verify sign m --key enc.pem --out x.sig </dev/null
expect_msg 1 "p256.pub: no PEM private key" tq-verify sign m --key p256.pub --out x.sig
expect_msg 1 "signed with another key" tq-verify verify m --pubkey ed.pub --sig p256.sig
[ ! -e x.sig ] || fail "a refused sign wrote x.sig"
exit 0
