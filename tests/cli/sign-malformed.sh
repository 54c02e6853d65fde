# Malformed, mismatched and foreign signature files: tq-verify verify exits 1 with one clear
# message each (pinned in sign-malformed.stdout.exact; 64-digit hex written HEX). Files that must
# carry a valid signature over a bad statement are signed here with the openssl tool.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/keys.sh"
make_key k prime256v1
make_key other prime256v1
mkdir m && echo "weights" > m/w.bin && echo "{}" > m/config.json
run tq-verify sign --quiet m --key k.pem --out good.sig
run tq-verify verify --quiet m --pubkey k.pub --sig good.sig

# case_ NAME [PUB]: verify m with NAME.sig; print the message (64-digit hex as HEX).
case_() {
  echo "--- $1"
  expect_exit 1 tq-verify verify m --pubkey "${2:-k.pub}" --sig "$1.sig" | sed 's/[0-9a-f]\{64\}/HEX/g'
}
# edit NAME PYTHON: NAME.sig = good.sig with the bundle b (a dict) changed by PYTHON.
edit() {
  python3 - "$1" "$2" <<'EOF' || fail "edit $1"
import base64, json, sys
b = json.load(open("good.sig"))
env = b["dsseEnvelope"]
exec(sys.argv[2])
json.dump(b, open(sys.argv[1] + ".sig", "w"))
EOF
}
# resign NAME PYTHON [TYPE]: NAME.sig holds the statement s (a dict, from good.sig) changed by
# PYTHON, as payload type TYPE, validly signed with k.pem by openssl.
resign() {
  python3 - "$1" "$2" "${3:-application/vnd.in-toto+json}" <<'EOF' || fail "resign $1"
import base64, json, subprocess, sys
name, code, typ = sys.argv[1], sys.argv[2], sys.argv[3].encode()
b = json.load(open("good.sig"))
s = json.loads(base64.b64decode(b["dsseEnvelope"]["payload"]))
exec(code)
body = json.dumps(s, indent=2).encode()
if name == "not-utf8":
    body = body.replace(b"w.bin", b"w\xff.bin")
open(name + ".pae", "wb").write(b"DSSEv1 %d %s %d %s" % (len(typ), typ, len(body), body))
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "k.pem", name + ".pae"], check=True, capture_output=True).stdout
b["dsseEnvelope"] = {"payload": base64.b64encode(body).decode(), "payloadType": typ.decode(),
                     "signatures": [{"sig": base64.b64encode(sig).decode(), "keyid": ""}]}
json.dump(b, open(name + ".sig", "w"))
EOF
}

edit bad-b64-payload 'env["payload"] = env["payload"][:40] + "!" + env["payload"][41:]'
case_ bad-b64-payload
edit bad-b64-sig 'env["signatures"][0]["sig"] = "MEUC IQAA"'
case_ bad-b64-sig
edit bad-b64-padding 'env["signatures"][0]["sig"] = "Zm9vYg="'
case_ bad-b64-padding
resign wrong-payload-type 'pass' application/json
case_ wrong-payload-type
resign wrong-predicate 's["predicateType"] = "https://slsa.dev/provenance/v1"'
case_ wrong-predicate
resign wrong-statement 's["_type"] = "https://in-toto.io/Statement/v0.1"'
case_ wrong-statement
resign wrong-subject 's["subject"][0]["digest"]["sha256"] = "0" * 64'
case_ wrong-subject
resign two-subjects 's["subject"].append(s["subject"][0])'
case_ two-subjects
resign unsafe-name 's["predicate"]["resources"][0]["name"] = "../w.bin"'
case_ unsafe-name
resign shards 's["predicate"]["serialization"]["method"] = "shards"'
case_ shards
resign blake3 's["predicate"]["serialization"]["hash_type"] = "blake3"'
case_ blake3
resign ignore-all 's["predicate"]["serialization"]["ignore_paths"] = ["."]'
case_ ignore-all
resign not-utf8 'pass'
case_ not-utf8
resign bad-digest 's["predicate"]["resources"][0]["digest"] = "xyz"'
case_ bad-digest
# another key: with the key hint, and without it (older bundles carry none)
case_ good other.pub
edit no-hint 'del b["verificationMaterial"]["publicKey"]["hint"]'
case_ no-hint other.pub
edit two-sigs 'env["signatures"].append(env["signatures"][0])'
case_ two-sigs
edit media-type 'b["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.1"'
case_ media-type
edit message-signature 'b["messageSignature"] = {}; del b["dsseEnvelope"]'
case_ message-signature
cp "$ROOT/testdata/oms/vectors/v1.1.0-certificate/model.sig" certificate.sig
case_ certificate
printf '{"mediaType": "a", "mediaType": "b"}' > duplicate-key.sig
case_ duplicate-key
size=$(stat -c %s good.sig)
for cut in 0 1 $((size / 2)) $((size - 2)); do
  head -c $cut good.sig > truncated-$cut.sig
  case_ truncated-$cut | sed "s/$cut bytes/N bytes/; s/truncated-$cut/truncated-N/g"
done
echo 'hello' > not-json.sig
case_ not-json
{ cat good.sig; echo '{}'; } > trailing.sig
case_ trailing
echo "--- missing"
expect_exit 1 tq-verify verify m --pubkey k.pub --sig nonexistent.sig
echo "--- not a key"
expect_exit 1 tq-verify verify m --pubkey good.sig --sig good.sig | sed 's/: [^:]*$/: .../'
exit 0
