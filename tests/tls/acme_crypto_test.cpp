// ACME's cryptography: base64url, the JWK thumbprint, ES256 JWS signatures (verified with
// OpenSSL as a CA would), certificate requests and the TLS-ALPN-01 certificate.
#include "sluice/tls/acme_crypto.hpp"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/x509v3.h>

#include <boost/json.hpp>

namespace sluice::tls::acme {
namespace {

std::string unbase64url(std::string_view text) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  unsigned bits = 0;
  int count = 0;
  for (char c : text) {
    bits = (bits << 6) | static_cast<unsigned>(alphabet.find(c));
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

TEST(AcmeCrypto, Base64urlHasNoPaddingAndTheUrlAlphabet) {
  EXPECT_EQ(base64url(""), "");
  EXPECT_EQ(base64url("f"), "Zg");
  EXPECT_EQ(base64url("fo"), "Zm8");
  EXPECT_EQ(base64url("foo"), "Zm9v");
  EXPECT_EQ(base64url("foob"), "Zm9vYg");
  EXPECT_EQ(base64url(std::string("\xfb\xff", 2)), "-_8");
}

// RFC 7638 §3.1: the thumbprint of the example RSA key, whose canonical JSON is given there.
TEST(AcmeCrypto, ThumbprintIsTheRfc7638Example) {
  const std::string canonical =
      R"({"e":"AQAB","kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"})";
  EXPECT_EQ(base64url(sha256(canonical)), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
}

TEST(AcmeCrypto, JwkIsCanonicalAndTheKeyAuthorizationEndsWithItsThumbprint) {
  const auto key = new_p256_key();
  const std::string text = jwk(key.get());
  // Members in lexicographic order, no white space (RFC 7638 §3.2).
  ASSERT_TRUE(text.starts_with(R"({"crv":"P-256","kty":"EC","x":")")) << text;
  const auto value = boost::json::parse(text);
  EXPECT_EQ(unbase64url(value.at("x").as_string()).size(), 32u);
  EXPECT_EQ(unbase64url(value.at("y").as_string()).size(), 32u);
  EXPECT_EQ(key_authorization("tok", key.get()), "tok." + base64url(sha256(text)));
}

TEST(AcmeCrypto, KeySurvivesPem) {
  const auto key = new_p256_key();
  const auto again = key_from_pem(key_pem(key.get()));
  ASSERT_TRUE(again);
  EXPECT_EQ(jwk(again.get()), jwk(key.get()));
  EXPECT_FALSE(key_from_pem("not a key"));
}

TEST(AcmeCrypto, JwsSignatureVerifiesWithTheAccountKey) {
  const auto key = new_p256_key();
  const std::string header = R"({"alg":"ES256","nonce":"n1","url":"https://ca/acct"})";
  const auto jws = boost::json::parse(sign_jws(key.get(), header, R"({"a":1})"));
  const std::string protected64(jws.at("protected").as_string());
  const std::string payload64(jws.at("payload").as_string());
  EXPECT_EQ(unbase64url(protected64), header);
  EXPECT_EQ(unbase64url(payload64), R"({"a":1})");
  const std::string raw = unbase64url(jws.at("signature").as_string());
  ASSERT_EQ(raw.size(), 64u);  // R || S (RFC 7518 §3.4), not DER

  ECDSA_SIG* sig = ECDSA_SIG_new();
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  ECDSA_SIG_set0(sig, BN_bin2bn(bytes, 32, nullptr), BN_bin2bn(bytes + 32, 32, nullptr));
  unsigned char* der = nullptr;
  const int der_size = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  const std::string input = protected64 + "." + payload64;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key.get());
  EXPECT_EQ(EVP_DigestVerify(md, der, der_size, reinterpret_cast<const unsigned char*>(input.data()), input.size()), 1);
  // The same signature does not verify another payload.
  const std::string other = protected64 + "." + base64url("{}");
  EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key.get());
  EXPECT_NE(EVP_DigestVerify(md, der, der_size, reinterpret_cast<const unsigned char*>(other.data()), other.size()), 1);
  EVP_MD_CTX_free(md);
  OPENSSL_free(der);
}

TEST(AcmeCrypto, CsrNamesEveryDomainAndIsSignedByTheKey) {
  const auto key = new_p256_key();
  const std::string der = csr_der(key.get(), {"a.test", "b.test"});
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509_REQ* req = d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size()));
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(X509_REQ_verify(req, key.get()), 1);
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req);
  auto* sans = static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(sans, nullptr);
  EXPECT_EQ(sk_GENERAL_NAME_num(sans), 2);
  GENERAL_NAMES_free(sans);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  X509_REQ_free(req);
}

// RFC 8737 §3: critical acmeIdentifier = DER OCTET STRING of SHA-256(key authorization), and
// the domain as the only subjectAltName.
TEST(AcmeCrypto, ChallengeCertificateCarriesTheAcmeIdentifier) {
  const auto key = new_p256_key();
  const auto cert = challenge_certificate(key.get(), "app.test", "token.thumb");
  ASSERT_TRUE(cert);
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  const int at = X509_get_ext_by_OBJ(cert.get(), oid, -1);
  ASN1_OBJECT_free(oid);
  ASSERT_GE(at, 0);
  X509_EXTENSION* ext = X509_get_ext(cert.get(), at);
  EXPECT_EQ(X509_EXTENSION_get_critical(ext), 1);
  const ASN1_OCTET_STRING* data = X509_EXTENSION_get_data(ext);
  const std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                          static_cast<std::size_t>(ASN1_STRING_length(data)));
  EXPECT_EQ(value, std::string("\x04\x20", 2) + sha256("token.thumb"));
  EXPECT_EQ(X509_check_host(cert.get(), "app.test", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_verify(cert.get(), key.get()), 1);  // self-signed
}

TEST(AcmeCrypto, PlaceholderServesTheDomains) {
  const auto key = new_p256_key();
  const auto cert = placeholder_certificate(key.get(), {"a.test", "b.test"});
  EXPECT_EQ(X509_check_host(cert.get(), "b.test", 0, 0, nullptr), 1);
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  EXPECT_EQ(X509_get_ext_by_OBJ(cert.get(), oid, -1), -1);  // never a challenge answer
  ASN1_OBJECT_free(oid);
}

}  // namespace
}  // namespace sluice::tls::acme
