#include "sluice/tls/acme_crypto.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace sluice::tls::acme {

namespace {

[[noreturn]] void fail(const char* what) {
  ERR_clear_error();
  throw std::runtime_error(std::string("ACME: ") + what);
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n > 0 ? n : 0));
}

// A P-256 public coordinate as the fixed 32 bytes RFC 7518 §6.2.1.2 asks for.
std::string coordinate(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) fail("the account key is not an EC key");
  unsigned char out[32];
  const int n = BN_bn2binpad(bn, out, sizeof out);
  BN_free(bn);
  if (n != 32) fail("the account key is not a P-256 key");
  return base64url({reinterpret_cast<const char*>(out), sizeof out});
}

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) fail("cannot build a certificate extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

std::string san_list(const std::vector<std::string>& domains) {
  std::string out;
  for (const auto& d : domains) out += (out.empty() ? "DNS:" : ",DNS:") + d;
  return out;
}

// A self-signed certificate valid from an hour ago (clock skew) for `days`.
Certificate self_signed(EVP_PKEY* key, const std::vector<std::string>& domains, long days) {
  Certificate cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 86400);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(domains.front().c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  add_extension(cert.get(), NID_subject_alt_name, san_list(domains).c_str());
  return cert;
}

void sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) == 0) fail("cannot sign a certificate");
}

}  // namespace

std::string base64url(std::string_view bytes) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(alphabet[(v >> shift) & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out.push_back(alphabet[(v >> 18) & 63]);
    out.push_back(alphabet[(v >> 12) & 63]);
    if (rest == 2) out.push_back(alphabet[(v >> 6) & 63]);
  }
  return out;
}

std::string sha256(std::string_view bytes) {
  unsigned char digest[32];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

PrivateKey new_p256_key() {
  PrivateKey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) fail("cannot generate a P-256 key");
  return key;
}

std::string key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bio_text(bio.get());
}

PrivateKey key_from_pem(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PrivateKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return key;
}

std::string jwk(EVP_PKEY* key) {
  return R"({"crv":"P-256","kty":"EC","x":")" + coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X) + R"(","y":")" +
         coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y) + "\"}";
}

std::string thumbprint(EVP_PKEY* key) { return base64url(sha256(jwk(key))); }

std::string key_authorization(std::string_view token, EVP_PKEY* account_key) {
  return std::string(token) + "." + thumbprint(account_key);
}

std::string sign_jws(EVP_PKEY* key, std::string_view protected_header, std::string_view payload) {
  const std::string header64 = base64url(protected_header);
  const std::string payload64 = base64url(payload);
  const std::string input = header64 + "." + payload64;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t size = 0;
  if (EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1)
    fail("cannot sign a request");
  std::string der(size, '\0');
  if (EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(der.data()), &size,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1)
    fail("cannot sign a request");
  // OpenSSL signs in DER (SEQUENCE { r, s }); JWS wants r and s as two fixed 32-byte numbers.
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(size));
  if (sig == nullptr) fail("cannot decode a signature");
  unsigned char raw[64];
  BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + 32, 32);
  ECDSA_SIG_free(sig);
  return R"({"protected":")" + header64 + R"(","payload":")" + payload64 + R"(","signature":")" +
         base64url({reinterpret_cast<const char*>(raw), sizeof raw}) + "\"}";
}

std::string csr_der(EVP_PKEY* key, const std::vector<std::string>& domains) {
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(X509_REQ_new(), X509_REQ_free);
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(domains.front().c_str()),
                             -1, -1, 0);
  X509_REQ_set_pubkey(req.get(), key);
  STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, nullptr, nullptr, req.get(), nullptr, 0);
  sk_X509_EXTENSION_push(exts, X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, san_list(domains).c_str()));
  X509_REQ_add_extensions(req.get(), exts);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  if (X509_REQ_sign(req.get(), key, EVP_sha256()) == 0) fail("cannot sign the certificate request");
  unsigned char* out = nullptr;
  const int n = i2d_X509_REQ(req.get(), &out);
  std::string der(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n > 0 ? n : 0));
  OPENSSL_free(out);
  return der;
}

Certificate challenge_certificate(EVP_PKEY* key, const std::string& domain, std::string_view key_authorization) {
  Certificate cert = self_signed(key, {domain}, 7);
  // extnValue is the DER of Authorization ::= OCTET STRING (SIZE (32)).
  const std::string digest = sha256(key_authorization);
  std::string value = std::string("\x04\x20", 2) + digest;
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  ASN1_OCTET_STRING* data = ASN1_OCTET_STRING_new();
  ASN1_OCTET_STRING_set(data, reinterpret_cast<const unsigned char*>(value.data()), static_cast<int>(value.size()));
  X509_EXTENSION* ext = X509_EXTENSION_create_by_OBJ(nullptr, oid, 1, data);
  X509_add_ext(cert.get(), ext, -1);
  X509_EXTENSION_free(ext);
  ASN1_OCTET_STRING_free(data);
  ASN1_OBJECT_free(oid);
  sign(cert.get(), key);
  return cert;
}

Certificate placeholder_certificate(EVP_PKEY* key, const std::vector<std::string>& domains) {
  Certificate cert = self_signed(key, domains, 7);
  sign(cert.get(), key);
  return cert;
}

}  // namespace sluice::tls::acme
