# Signed publishing end to end: manifest, sign, pack (model.sig travels in the bundle), then
# check BUNDLE --pubkey, unpack, verify and check DIR --pubkey; a bundle whose content or
# signature does not match is refused, naming the file.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/keys.sh"
make_key k prime256v1
make_key other ed25519
run tq-mkmodel --arch qwen3_moe --size tiny --seed 9 --quiet m
run tq-verify manifest --quiet m
run tq-verify sign --quiet m --key k.pem
# The signature leaves out the manifests (pack writes them anew) and manifests leave out
# model.sig, so the order of manifest and sign does not matter.
run tq-verify check --quiet m
run tq-verify check --quiet m --pubkey k.pub
run tq-verify pack --quiet m -o a.tar.zst
run tq-verify check --quiet a.tar.zst
tq-verify check a.tar.zst --pubkey k.pub > out || fail "check --pubkey: $(cat out)"
grep -q "^a.tar.zst: OK ([0-9]* of [0-9]* files verified, 0 problems; a.tar.zst: model.sig: a valid signature by the ecdsa-p256 key [0-9a-f]\{16\})$" out ||
  fail "check --pubkey: $(cat out)"
tar --zstd -tf a.tar.zst > list || fail "tar cannot list a.tar.zst"
[ "$(head -n3 list | tr '\n' ' ')" = "tq-manifest.json SHA256SUMS model.sig " ] || fail "bundle entries: $(head -n3 list)"
# pack is still deterministic, and a second sign (new ECDSA nonce) changes only model.sig.
run tq-verify pack --quiet m -o b.tar.zst
cmp -s a.tar.zst b.tar.zst || fail "pack of a signed directory is not deterministic"
run tq-verify unpack --quiet a.tar.zst -o u
cmp -s m/model.sig u/model.sig || fail "unpack changed model.sig"
run tq-verify verify --quiet u --pubkey k.pub
run tq-verify check --quiet u --pubkey k.pub
# Another key: refused; no model.sig: refused.
expect_msg 1 "signed with another key" tq-verify check a.tar.zst --pubkey other.pub
mkdir plain && cp m/*.json m/*.safetensors plain/ 2>/dev/null
run tq-verify pack --quiet plain -o plain.tar.zst
expect_msg 1 "no model.sig in the bundle" tq-verify check plain.tar.zst --pubkey k.pub
run tq-verify check --quiet plain.tar.zst
# A model changed after signing, then packed with a fresh manifest: the bundle is consistent
# with its manifest, but not with the signature, and check names the file.
cp -r m m2
f=$(cd m2 && ls *.safetensors | sed -n 1p)
printf X | dd of="m2/$f" bs=1 seek=$(($(stat -c %s "m2/$f") - 10)) conv=notrunc status=none
rm m2/SHA256SUMS m2/tq-manifest.json
run tq-verify pack --quiet m2 -o c.tar.zst
run tq-verify check --quiet c.tar.zst
tq-verify check c.tar.zst --pubkey k.pub > out 2>err; rc=$?
[ "$rc" = 1 ] && grep -q "^$f: signature: sha256 [0-9a-f]\{64\}, signed [0-9a-f]\{64\}$" out || fail "changed file: exit $rc: $(cat out err)"
grep -q "FAILED" out || fail "changed file: $(tail -n1 out)"
run tq-verify manifest --quiet m2
tq-verify check m2 --pubkey k.pub > out 2>err; rc=$?
[ "$rc" = 1 ] && grep -q "^$f: signature: sha256 [0-9a-f]\{64\}, signed [0-9a-f]\{64\}$" out || fail "check DIR: exit $rc: $(cat out err)"
rm m2/SHA256SUMS m2/tq-manifest.json
# An extra file in the directory: a manifest problem and a signature problem.
echo extra > m2/extra.txt
run tq-verify pack --quiet m2 -o d.tar.zst
tq-verify check d.tar.zst --pubkey k.pub > out 2>err; rc=$?
[ "$rc" = 1 ] && grep -qx "extra.txt: signature: present but not signed" out || fail "extra file: exit $rc: $(cat out err)"
# A malformed model.sig makes pack refuse; nothing is written.
cp -r m m3 && echo '{"mediaType":' > m3/model.sig
expect_msg 1 "m3/model.sig: signature bundle: truncated JSON" tq-verify pack m3 -o e.tar.zst
[ ! -e e.tar.zst ] || fail "pack wrote e.tar.zst"
# A signature written outside the directory is not packed; one at another name inside is
# left out of the signature itself (its ignore_paths name it).
run tq-verify sign --quiet m --key k.pem --out m/sub.sig
run tq-verify verify --quiet m --pubkey k.pub --sig m/sub.sig
exit 0
