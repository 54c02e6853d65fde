# Signatures tq-verify sign makes verify with the openssl command-line tool from the envelope
# alone: the PAE is rebuilt here from the DSSE definition (python), not by tq. A one-byte
# change to the signed payload, its type, the signature or any file is refused, naming what
# changed; a signature openssl makes over tq's payload verifies with tq.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/keys.sh"
make_key ec prime256v1
make_key ed ed25519
run tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --quiet m

# envelope SIG: writes payload.bin, type.txt, sig.bin and pae.bin (DSSEv1 SP LEN(type) SP type
# SP LEN(body) SP body, lengths in ASCII decimal).
envelope() {
  python3 - "$1" <<'EOF'
import base64, json, sys
env = json.load(open(sys.argv[1]))["dsseEnvelope"]
body = base64.b64decode(env["payload"], validate=True)
typ = env["payloadType"].encode()
open("payload.bin", "wb").write(body)
open("type.txt", "wb").write(typ)
open("sig.bin", "wb").write(base64.b64decode(env["signatures"][0]["sig"], validate=True))
open("pae.bin", "wb").write(b"DSSEv1 %d %s %d %s" % (len(typ), typ, len(body), body))
EOF
}
flip() { python3 -c 'import sys; p, at = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, "rb").read()); b[at % len(b)] ^= 1; open(p, "wb").write(b)' "$@"; }

# ECDSA P-256: openssl dgst checks the DER signature over SHA-256 of the PAE.
run tq-verify sign --quiet m --key ec.pem
[ -f m/model.sig ] || fail "no m/model.sig"
run tq-verify verify --quiet m --pubkey ec.pub
run envelope m/model.sig
[ "$(cat type.txt)" = application/vnd.in-toto+json ] || fail "payload type $(cat type.txt)"
openssl dgst -sha256 -verify ec.pub -signature sig.bin pae.bin | grep -x "Verified OK" >/dev/null || fail "openssl: ECDSA signature does not verify"
run cp pae.bin pae1.bin; run flip pae1.bin 100
if openssl dgst -sha256 -verify ec.pub -signature sig.bin pae1.bin >/dev/null 2>&1; then fail "openssl accepted a changed PAE"; fi

# Ed25519: openssl pkeyutl checks the raw 64-byte signature over the PAE itself.
run tq-verify sign --quiet m --key ed.pem --out ed.sig
run tq-verify verify --quiet m --pubkey ed.pub --sig ed.sig
run envelope ed.sig
[ "$(stat -c %s sig.bin)" = 64 ] || fail "Ed25519 signature of $(stat -c %s sig.bin) bytes"
openssl pkeyutl -verify -pubin -inkey ed.pub -rawin -in pae.bin -sigfile sig.bin | grep "Signature Verified Successfully" >/dev/null ||
  fail "openssl: Ed25519 signature does not verify"
run cp pae.bin pae1.bin; run flip pae1.bin 7
if openssl pkeyutl -verify -pubin -inkey ed.pub -rawin -in pae1.bin -sigfile sig.bin >/dev/null 2>&1; then fail "openssl accepted a changed PAE"; fi
# (ed.sig lies outside m, so m/model.sig is the only signature m holds: ed.sig is not extra)

# rebuild SIG_IN OUT FIELD AT: a copy of the bundle with one byte of the decoded payload, the
# payload type or the decoded signature flipped.
rebuild() {
  python3 - "$@" <<'EOF'
import base64, json, sys
src, dst, field, at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
b = json.load(open(src))
env = b["dsseEnvelope"]
if field == "payloadType":
    t = bytearray(env["payloadType"].encode()); t[at % len(t)] ^= 1; env["payloadType"] = t.decode()
else:
    holder = env if field == "payload" else env["signatures"][0]
    key = "payload" if field == "payload" else "sig"
    d = bytearray(base64.b64decode(holder[key])); d[at % len(d)] ^= 1
    holder[key] = base64.b64encode(bytes(d)).decode()
json.dump(b, open(dst, "w"))
EOF
}
for key in ec ed; do
  sig=m/model.sig; [ $key = ed ] && sig=ed.sig
  n=$(python3 -c 'import base64, json, sys; print(len(base64.b64decode(json.load(open(sys.argv[1]))["dsseEnvelope"]["payload"])))' $sig)
  for at in 0 1 $((n / 3)) $((n / 2)) $((n - 2)) $((n - 1)); do
    run rebuild $sig bad.sig payload $at
    expect_msg 1 "bad.sig: the signature does not verify with this" tq-verify verify m --pubkey $key.pub --sig bad.sig
  done
  for at in 0 12 27; do
    run rebuild $sig bad.sig payloadType $at
    expect_msg 1 "bad.sig: payload type \"" tq-verify verify m --pubkey $key.pub --sig bad.sig
  done
  for at in 5 40; do
    run rebuild $sig bad.sig sig $at
    expect_msg 1 "bad.sig: the signature does not verify with this" tq-verify verify m --pubkey $key.pub --sig bad.sig
  done
done

# One byte of any file: that file is named, the others still match.
(cd m && find . -type f ! -name model.sig | sed 's|^\./||' | sort) > files
[ "$(wc -l < files)" -ge 3 ] || fail "too few files in m"
while IFS= read -r f; do
  run cp "m/$f" keep
  size=$(stat -c %s "m/$f")
  run flip "m/$f" $((size / 2))
  tq-verify verify m --pubkey ec.pub > out 2>err; rc=$?
  [ "$rc" = 1 ] || fail "$f changed: exit $rc"
  grep -q "^$f: sha256 [0-9a-f]\{64\}, signed [0-9a-f]\{64\}$" out || fail "$f changed: not named ($(cat out))"
  [ "$(grep -c ': sha256 ' out)" = 1 ] || fail "$f changed: other files named too ($(cat out))"
  tail -n1 out | grep "^m: FAILED ($(($(wc -l < files) - 1)) of $(wc -l < files) signed files verified, 1 problem;" >/dev/null ||
    fail "$f changed: summary $(tail -n1 out)"
  run cp keep "m/$f"
done < files
run tq-verify verify --quiet m --pubkey ec.pub
# A missing and an extra file.
f=$(head -n1 files)
run mv "m/$f" moved
echo extra > m/extra.txt
tq-verify verify m --pubkey ec.pub > out 2>err; rc=$?
[ "$rc" = 1 ] && grep -qx "$f: signed but missing" out && grep -qx "extra.txt: present but not signed" out ||
  fail "missing/extra: exit $rc: $(cat out err)"
run mv moved "m/$f"; run rm m/extra.txt

# A signature openssl makes over tq's payload, in a bundle assembled here, verifies with tq.
run envelope m/model.sig
run openssl dgst -sha256 -sign ec.pem -out osig.bin pae.bin
python3 - <<'EOF'
import base64, json
b = json.load(open("m/model.sig"))
b["dsseEnvelope"]["signatures"] = [{"sig": base64.urlsafe_b64encode(open("osig.bin", "rb").read()).decode().rstrip("=")}]
del b["verificationMaterial"]["publicKey"]["hint"]
json.dump(b, open("openssl.sig", "w"), indent=1)
EOF
[ $? = 0 ] || fail "cannot assemble openssl.sig"
run tq-verify verify --quiet m --pubkey ec.pub --sig openssl.sig
exit 0
