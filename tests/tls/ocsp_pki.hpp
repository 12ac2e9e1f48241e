#pragma once
// A small PKI made at test time for OCSP tests: a CA, a leaf it signs whose AIA names an OCSP
// responder, a delegated responder certificate (OCSPSigning), a stranger CA; and OCSP responses
// built and signed with OpenSSL's API, with the times and statuses a test asks for.
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace sluice::testing {

struct Identity {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  Identity() = default;
  Identity(const Identity&) = delete;
  Identity& operator=(const Identity&) = delete;
  ~Identity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

class OcspPki {
public:
  static constexpr const char* responder = "http://127.0.0.1:8888/ocsp";

  OcspPki() {
    char pattern[] = "/tmp/sluice-ocsp-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    make(ca, "test CA", nullptr, "critical,CA:TRUE", "");
    make(leaf, "leaf.test", &ca, "CA:FALSE", std::string("OCSP;URI:") + responder);
    make(delegated, "responder", &ca, "CA:FALSE", "", "OCSPSigning");
    make(plain_leaf, "plain.test", &ca, "CA:FALSE", "");
    make(stranger, "stranger CA", nullptr, "critical,CA:TRUE", "");
  }
  ~OcspPki() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // A PEM file holding these certificates in order (the chain file of a listener).
  std::string chain_file(const std::string& name, std::initializer_list<X509*> certs) const {
    const auto path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    for (X509* c : certs) PEM_write_X509(f, c);
    std::fclose(f);
    return path;
  }

  struct Answer {
    int status = V_OCSP_CERTSTATUS_GOOD;
    long this_update = -60;                // seconds from `now`
    std::optional<long> next_update = 3600;  // seconds from `now`; nullopt = none
    const Identity* signer = nullptr;        // default: the CA
    X509* about = nullptr;                   // default: the leaf
    int response_status = OCSP_RESPONSE_STATUS_SUCCESSFUL;
  };
  // The DER response `a` describes, with times relative to `now` (seconds since the epoch).
  std::string response(const Answer& a, std::time_t now) const {
    if (a.response_status != OCSP_RESPONSE_STATUS_SUCCESSFUL) return der(OCSP_response_create(a.response_status, nullptr));
    OCSP_BASICRESP* basic = OCSP_BASICRESP_new();
    OCSP_CERTID* id = OCSP_cert_to_id(EVP_sha1(), a.about != nullptr ? a.about : leaf.cert, ca.cert);
    ASN1_TIME* this_upd = ASN1_GENERALIZEDTIME_set(nullptr, now + a.this_update);
    ASN1_TIME* next_upd = a.next_update ? ASN1_GENERALIZEDTIME_set(nullptr, now + *a.next_update) : nullptr;
    ASN1_TIME* revoked_at = a.status == V_OCSP_CERTSTATUS_REVOKED ? ASN1_GENERALIZEDTIME_set(nullptr, now - 7200) : nullptr;
    OCSP_basic_add1_status(basic, id, a.status, OCSP_REVOKED_STATUS_KEYCOMPROMISE, revoked_at, this_upd, next_upd);
    const Identity& signer = a.signer != nullptr ? *a.signer : ca;
    OCSP_basic_sign(basic, signer.cert, signer.key, EVP_sha256(), nullptr, 0);  // signer cert included
    OCSP_RESPONSE* response = OCSP_response_create(OCSP_RESPONSE_STATUS_SUCCESSFUL, basic);
    OCSP_BASICRESP_free(basic);
    OCSP_CERTID_free(id);
    ASN1_TIME_free(this_upd);
    ASN1_TIME_free(next_upd);
    ASN1_TIME_free(revoked_at);
    return der(response);
  }

  Identity ca, leaf, delegated, plain_leaf, stranger;

private:
  static std::string der(OCSP_RESPONSE* response) {
    unsigned char* bytes = nullptr;
    const int n = i2d_OCSP_RESPONSE(response, &bytes);
    std::string out(reinterpret_cast<char*>(bytes), static_cast<std::size_t>(n));
    OPENSSL_free(bytes);
    OCSP_RESPONSE_free(response);
    return out;
  }

  static void make(Identity& id, const std::string& cn, const Identity* issuer, const std::string& basic,
                   const std::string& aia, const std::string& eku = "") {
    static long serial = 100;
    id.key = EVP_EC_gen("P-256");
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, id.key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer->cert) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer != nullptr ? issuer->cert : x, x, nullptr, nullptr, 0);
    const auto add = [&](int nid, const std::string& value) {
      if (value.empty()) return;
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    };
    add(NID_basic_constraints, basic);
    add(NID_info_access, aia);
    add(NID_ext_key_usage, eku);
    X509_sign(x, issuer != nullptr ? issuer->key : id.key, EVP_sha256());
    id.cert = x;
  }

  std::string dir_;
};

}  // namespace sluice::testing
