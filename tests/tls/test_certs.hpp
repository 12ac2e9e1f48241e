#pragma once
// Certificates made at test time with OpenSSL's API (no key is ever checked in): a CA, and leaf
// certificates it signs for given DNS names and validity windows, written as PEM files into a
// fresh temporary directory that is removed with the object.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace sluice::testing {

class TestCerts {
public:
  struct Pair {
    std::string cert;  // file paths
    std::string key;
  };

  explicit TestCerts(const std::string& ca_name = "sluice test CA") {
    char pattern[] = "/tmp/sluice-certs-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    ca_key_ = new_key();
    ca_ = make_cert(ca_key_, ca_name, "", 0, 86400, nullptr, nullptr, true);
    ca_file_ = write_cert(ca_, "ca.pem");
  }
  ~TestCerts() {
    X509_free(ca_);
    EVP_PKEY_free(ca_key_);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  const std::string& ca_file() const { return ca_file_; }
  const std::string& dir() const { return dir_; }

  // A leaf for `sans` ("DNS:a.test,DNS:*.b.test,IP:127.0.0.1"), valid from now+not_before to
  // now+not_after seconds, signed by the CA; files "<name>.pem" and "<name>.key".
  Pair leaf(const std::string& name, const std::string& sans, long not_before = -60,
            long not_after = 86400) {
    EVP_PKEY* key = new_key();
    X509* cert = make_cert(key, name, sans, not_before, not_after, ca_, ca_key_, false);
    Pair p{write_cert(cert, name + ".pem"), write_key(key, name + ".key")};
    X509_free(cert);
    EVP_PKEY_free(key);
    return p;
  }

  // A file with the given text (garbage, or a key of another pair).
  std::string file(const std::string& name, const std::string& text) {
    const auto path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return path;
  }

private:
  static EVP_PKEY* new_key() { return EVP_EC_gen("P-256"); }

  static X509* make_cert(EVP_PKEY* key, const std::string& cn, const std::string& sans,
                         long not_before, long not_after, X509* issuer, EVP_PKEY* issuer_key,
                         bool ca) {
    static long serial = 1;
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), not_before);
    X509_gmtime_adj(X509_getm_notAfter(x), not_after);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
    const auto add = [&](int nid, const std::string& value) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
      X509_add_ext(x, ext, -1);
      X509_EXTENSION_free(ext);
    };
    if (ca) {
      add(NID_basic_constraints, "critical,CA:TRUE");
      add(NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      add(NID_basic_constraints, "CA:FALSE");
      if (!sans.empty()) add(NID_subject_alt_name, sans);
    }
    X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256());
    return x;
  }

  std::string write_cert(X509* cert, const std::string& name) {
    const auto path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    PEM_write_X509(f, cert);
    std::fclose(f);
    return path;
  }

  std::string write_key(EVP_PKEY* key, const std::string& name) {
    const auto path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    return path;
  }

  std::string dir_;
  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_ = nullptr;
  std::string ca_file_;
};

}  // namespace sluice::testing
