# Signing keys for the model-signature tests, made by the openssl tool (sourced after
# common.sh, which gives fail).
#
#   make_key NAME ALG   NAME.pem (private, unencrypted PEM) and NAME.pub (public PEM); ALG is
#                       an EC curve (prime256v1, secp384r1, secp521r1), ed25519 or rsa

make_key() {
  case $2 in
    ed25519) openssl genpkey -algorithm ed25519 -out "$1.pem" 2>/dev/null ;;
    rsa) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$1.pem" 2>/dev/null ;;
    *) openssl ecparam -name "$2" -genkey -noout -out "$1.pem" 2>/dev/null ;;
  esac && openssl pkey -in "$1.pem" -pubout -out "$1.pub" || fail "openssl cannot make a $2 key"
}
