#include "sluice/tls/ocsp.hpp"

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <utility>
#include <vector>

#include "sluice/core/file.hpp"

namespace sluice::tls::ocsp {

namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using CertId = std::unique_ptr<OCSP_CERTID, Deleter<OCSP_CERTID, OCSP_CERTID_free>>;
using Request = std::unique_ptr<OCSP_REQUEST, Deleter<OCSP_REQUEST, OCSP_REQUEST_free>>;
using OcspResponse = std::unique_ptr<OCSP_RESPONSE, Deleter<OCSP_RESPONSE, OCSP_RESPONSE_free>>;
using Basic = std::unique_ptr<OCSP_BASICRESP, Deleter<OCSP_BASICRESP, OCSP_BASICRESP_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;

void free_certs(STACK_OF(X509) * s) { sk_X509_pop_free(s, X509_free); }
using CertStack = std::unique_ptr<STACK_OF(X509), Deleter<STACK_OF(X509), free_certs>>;

std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return reason != nullptr ? reason : "unknown error";
}

std::optional<UnixTime> unix_time(const ASN1_GENERALIZEDTIME* t) {
  if (t == nullptr) return std::nullopt;
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  return static_cast<UnixTime>(timegm(&tm));
}

std::vector<Cert> read_chain(const std::string& path, std::string& why) {
  std::vector<Cert> out;
  std::string text;
  if (read_whole_file(path, text) != 0) {
    why = "cannot read '" + path + "'";
    return out;
  }
  Bio bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the loop ends on "no start line"
  return out;
}

CertId cert_id(X509* leaf, X509* issuer) {
  return CertId(OCSP_cert_to_id(EVP_sha1(), leaf, issuer));
}

// The signer must chain to the issuer (the issuer itself, or a responder certificate it signed
// with the OCSPSigning purpose, which OCSP_basic_verify checks). The issuer is the only trust
// anchor: it may be an intermediate, hence a partial chain.
std::optional<std::string> check_signature(OCSP_BASICRESP* basic, X509* issuer) {
  Store store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), issuer);
  X509_STORE_set_flags(store.get(), X509_V_FLAG_PARTIAL_CHAIN);
  CertStack certs(sk_X509_new_null());
  X509_up_ref(issuer);
  sk_X509_push(certs.get(), issuer);
  if (OCSP_basic_verify(basic, certs.get(), store.get(), 0) != 1)
    return "signature does not verify against the issuer: " + openssl_reason();
  return std::nullopt;
}

std::variant<Basic, std::string> successful_basic(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  OcspResponse response(d2i_OCSP_RESPONSE(nullptr, &p, static_cast<long>(der.size())));
  if (!response) {
    ERR_clear_error();
    return std::string("not a DER OCSP response");
  }
  const int status = OCSP_response_status(response.get());
  if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL)
    return std::string("responder answered ") + OCSP_response_status_str(status);
  Basic basic(OCSP_response_get1_basic(response.get()));
  if (!basic) return std::string("no basic response");
  return basic;
}

}  // namespace

std::optional<HttpUrl> parse_http_url(std::string_view url, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<HttpUrl> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  std::string scheme(url.substr(0, 7));
  for (auto& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  if (scheme != "http://")
    return fail("must be an http:// URL (OCSP responses are signed; https:// is not supported)");
  url.remove_prefix(scheme.size());
  const auto slash = url.find_first_of("/?");
  std::string_view authority = url.substr(0, slash);
  HttpUrl out;
  // The target always starts with '/': "http://host?q" asks for "/?q".
  const std::string_view rest = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  out.target = rest.empty() || rest.front() == '?' ? "/" : "";
  out.target += rest;
  if (authority.find('@') != std::string_view::npos) return fail("must not carry user information");
  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return fail("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return fail("bad port");
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return fail("has no host");
  if (!port.empty() && (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })))
    return fail("bad port");
  out.port = port.empty() ? "80" : std::string(port);
  return out;
}

std::string responder_url(X509* leaf) {
  std::string out;
  STACK_OF(OPENSSL_STRING)* urls = X509_get1_ocsp(leaf);
  for (int i = 0; i < sk_OPENSSL_STRING_num(urls) && out.empty(); ++i) {
    const std::string url = sk_OPENSSL_STRING_value(urls, i);
    if (parse_http_url(url)) out = url;
  }
  X509_email_free(urls);  // OpenSSL's documented way to free X509_get1_ocsp's stack
  return out;
}

const char* status_name(CertStatus status) {
  switch (status) {
    case CertStatus::good: return "good";
    case CertStatus::revoked: return "revoked";
    case CertStatus::unknown: break;
  }
  return "unknown";
}

UnixTime Response::expires() const noexcept {
  return next_update ? *next_update : this_update + max_age_without_next_update;
}

std::optional<Subject> Subject::from_chain_file(const std::string& cert_file,
                                                const std::string& responder_override,
                                                std::string& why) {
  const auto chain = read_chain(cert_file, why);
  if (chain.empty()) {
    if (why.empty()) why = "'" + cert_file + "': no PEM certificate found";
    return std::nullopt;
  }
  std::string responder = responder_override.empty() ? responder_url(chain[0].get()) : responder_override;
  if (responder.empty()) {
    why = "the certificate names no http:// OCSP responder";
    return std::nullopt;
  }
  // The issuer is the chain's certificate that signed the leaf (normally the second).
  for (std::size_t i = 1; i < chain.size(); ++i)
    if (X509_check_issued(chain[i].get(), chain[0].get()) == X509_V_OK)
      return Subject(chain[0].get(), chain[i].get(), std::move(responder));
  why = "'" + cert_file + "' holds no issuer certificate after the leaf (needed to ask its status)";
  return std::nullopt;
}

Subject::Subject(X509* leaf, X509* issuer, std::string responder)
    : leaf_(leaf), issuer_(issuer), responder_(std::move(responder)) {
  X509_up_ref(leaf_);
  X509_up_ref(issuer_);
}

Subject::~Subject() {
  X509_free(leaf_);
  X509_free(issuer_);
}

Subject::Subject(Subject&& other) noexcept
    : leaf_(std::exchange(other.leaf_, nullptr)), issuer_(std::exchange(other.issuer_, nullptr)),
      responder_(std::move(other.responder_)) {}

std::string Subject::identity() const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  X509_digest(leaf_, EVP_sha256(), digest, &size);
  return std::string(reinterpret_cast<const char*>(digest), size) + responder_;
}

std::string Subject::request() const {
  Request req(OCSP_REQUEST_new());
  CertId id = cert_id(leaf_, issuer_);
  if (!req || !id || OCSP_request_add0_id(req.get(), id.get()) == nullptr) return {};
  id.release();  // add0: the request owns it now
  const int n = i2d_OCSP_REQUEST(req.get(), nullptr);
  if (n <= 0) return {};
  std::string der(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_OCSP_REQUEST(req.get(), &p);
  return der;
}

std::variant<Response, std::string> Subject::verify(std::string_view der, UnixTime now) const {
  auto basic_or = successful_basic(der);
  if (auto* why = std::get_if<std::string>(&basic_or)) return *why;
  auto& basic = std::get<Basic>(basic_or);
  if (auto bad = check_signature(basic.get(), issuer_)) return *bad;
  CertId id = cert_id(leaf_, issuer_);
  int status = V_OCSP_CERTSTATUS_UNKNOWN, reason = 0;
  ASN1_GENERALIZEDTIME *revoked_at = nullptr, *this_upd = nullptr, *next_upd = nullptr;
  if (OCSP_resp_find_status(basic.get(), id.get(), &status, &reason, &revoked_at, &this_upd, &next_upd) != 1)
    return std::string("the response does not cover this certificate");
  Response out;
  const auto this_update = unix_time(this_upd);
  if (!this_update) return std::string("no thisUpdate");
  out.this_update = *this_update;
  out.next_update = unix_time(next_upd);
  if (out.this_update > now + allowed_skew) return std::string("thisUpdate is in the future");
  if (!stapleable(out, now)) return std::string(out.next_update ? "nextUpdate has passed" : "too old");
  out.status = status == V_OCSP_CERTSTATUS_GOOD      ? CertStatus::good
               : status == V_OCSP_CERTSTATUS_REVOKED ? CertStatus::revoked
                                                     : CertStatus::unknown;
  out.der = std::string(der);
  return out;
}

UnixTime refresh_after(const Response& r, UnixTime now) noexcept {
  const UnixTime half = r.next_update ? (*r.next_update - now) / 2 : refresh_without_next_update;
  return std::max(min_refresh, std::min(half, max_refresh));
}

UnixTime retry_after(unsigned failures, const Response* current, UnixTime now) noexcept {
  UnixTime delay = first_retry;
  for (unsigned i = 1; i < failures && delay < max_retry; ++i) delay *= 2;
  delay = std::min(delay, max_retry);
  if (current != nullptr && stapleable(*current, now)) delay = std::min(delay, (current->expires() - now) / 2);
  return std::max(delay, first_retry);
}

}  // namespace sluice::tls::ocsp
