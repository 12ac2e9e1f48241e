#!/usr/bin/env bash
# Makes a throw-away CA and one certificate it signs, for trying TLS locally and for benchmarks:
#   scripts/make-test-certs.sh DIR [NAME...]
# writes DIR/ca.pem (trust this one: curl --cacert DIR/ca.pem), DIR/cert.pem and DIR/key.pem for
# "localhost", 127.0.0.1, ::1 and every NAME. ECDSA P-256, valid 30 days. Never use these keys for
# anything real: they are made to be thrown away (and are never checked in).
set -euo pipefail
dir=${1:?usage: $0 DIR [NAME...]}
shift
mkdir -p "$dir"
sans="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do sans+=",DNS:$name"; done
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=sluice throw-away test CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/CN=${1:-localhost}" -keyout "$dir/key.pem" -out "$dir/cert.csr" 2>/dev/null
printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$sans" > "$dir/cert.ext"
openssl x509 -req -in "$dir/cert.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 30 -extfile "$dir/cert.ext" -out "$dir/cert.pem" 2>/dev/null
rm -f "$dir/cert.csr" "$dir/cert.ext" "$dir/ca.srl"
echo "$dir/cert.pem and $dir/key.pem (trust $dir/ca.pem)"
