# tq-verify sign/verify against the model_signing tool's own published behaviour
# (testdata/oms/README.md): the payloads tq signs for that project's sample models equal its
# golden payloads after canonicalisation (Python's json, sorted keys, no whitespace), and the
# signatures its released versions made verify with tq.
set -euo pipefail
. "$ROOT/tests/lib/common.sh"
T=$ROOT/testdata/oms
. "$ROOT/tests/lib/keys.sh"
make_key k prime256v1
canon() { python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin), sort_keys=True, separators=(",", ":")))'; }
payload() { python3 -c 'import base64, json, sys; sys.stdout.buffer.write(base64.b64decode(json.load(open(sys.argv[1]))["dsseEnvelope"]["payload"]))' "$1"; }

# The sample models, as model-transparency's conftest.py makes them.
cp -r "$T/models" m
mkdir m/empty_folder_model m/symlink_model
ln -s "$PWD/m/external/file" m/symlink_model/symlink_file
mkdir sigs
# fixture name -> model path; their goldens were made with allow_symlinks=True and nothing
# ignored, which is what these options ask for (the signature is written outside the model).
for pair in sample_model_folder:sample_model deep_model_folder:deep_model \
            model_folder_with_empty_file:empty_file_inside_model empty_model_folder:empty_folder_model \
            symlink_model_folder:symlink_model sample_model_file:file_model empty_model_file:empty_file_model; do
  fixture=${pair%%:*} model=${pair#*:}
  run tq-verify sign --quiet --key k.pem --out "sigs/$fixture.sig" --allow-symlinks --no-ignore-git-paths \
    --no-ignore-manifests "m/$model"
  payload "sigs/$fixture.sig" | canon > got.json
  canon < "$T/expected/$fixture.json" > want.json
  cmp -s got.json want.json || fail "$fixture: payload differs from model_signing's golden: $(diff want.json got.json)"
  run tq-verify verify --quiet --pubkey k.pub --sig "sigs/$fixture.sig" "m/$model"
done

# Signatures made by model_signing v0.3.1, v1.0.0, v1.0.1 and v1.1.0 (ECDSA P-384).
V=$T/vectors
pub=$V/signing-key-pub.pem
run tq-verify verify --quiet --pubkey "$pub" "$V/v1.1.0-elliptic-key"  # its ignore_paths leave out ignore-me
run tq-verify verify --quiet --pubkey "$pub" --ignore-paths "$V/v1.0.1-elliptic-key/ignore-me" "$V/v1.0.1-elliptic-key"
run tq-verify verify --quiet --pubkey "$pub" --sig "$V/v1.0.0-elliptic-key/model.sig" "$V/v1.0.0-elliptic-key/signme-1"
run tq-verify verify --quiet --pubkey "$pub" --sig "$V/v0.3.1-elliptic-key/model.sig" "$V/v0.3.1-elliptic-key/signme-1"
# v1.0.1 signed without ignore-me, so without --ignore-paths the file is extra.
set +e; tq-verify verify --pubkey "$pub" "$V/v1.0.1-elliptic-key" > out 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -qx "ignore-me: present but not signed" out || fail "v1.0.1 without --ignore-paths: exit $rc: $(cat out err)"
# A model_signing signature of a changed copy names the file.
cp -r "$V/v1.1.0-elliptic-key" v11
printf 'signme-1\n!' > v11/signme-1
set +e; tq-verify verify --pubkey "$pub" v11 > out 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "^signme-1: sha256 [0-9a-f]*, signed bc9a717db6064a32" out || fail "changed copy: exit $rc: $(cat out err)"
# tq's key hint is the one model_signing writes for this key.
want=$(sed -n 's/.*"hint":"\([0-9a-f]*\)".*/\1/p' "$V/v1.1.0-elliptic-key/model.sig")
tq-verify verify --json --pubkey "$pub" "$V/v1.1.0-elliptic-key" > v.json || fail "verify --json: exit $?"
got=$(jget v.json key_hint)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "key hint '$got', model_signing wrote '$want'"
exit 0
