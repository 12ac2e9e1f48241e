// OCSP stapling's protocol part (tls/ocsp.hpp): responder URLs, the request, the checks a
// response passes before it is stapled, freshness and the fetch schedule, on a manual clock (every
// time is passed in).
#include "sluice/tls/ocsp.hpp"

#include <gtest/gtest.h>

#include "ocsp_pki.hpp"

namespace sluice::tls::ocsp {
namespace {

using testing::OcspPki;

constexpr UnixTime now = 1'800'000'000;  // a fixed "now" for every verdict below

const std::string& failure(const std::variant<Response, std::string>& v) {
  static const std::string none = "(verified)";
  return v.index() == 1 ? std::get<1>(v) : none;
}

TEST(OcspUrl, TakesHttpUrlsOnly) {
  auto u = parse_http_url("http://ocsp.example.com/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "ocsp.example.com");
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->target, "/");
  u = parse_http_url("HTTP://127.0.0.1:8888");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, "8888");
  EXPECT_EQ(u->target, "/");
  u = parse_http_url("http://[::1]:81/a/b?c");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "81");
  EXPECT_EQ(u->target, "/a/b?c");
  std::string why;
  EXPECT_FALSE(parse_http_url("https://ocsp.example.com/", &why));
  EXPECT_EQ(why, "must be an http:// URL (OCSP responses are signed; https:// is not supported)");
  EXPECT_FALSE(parse_http_url("http:///x", &why));
  EXPECT_EQ(why, "has no host");
  EXPECT_FALSE(parse_http_url("http://a:80x/", &why));
  EXPECT_EQ(why, "bad port");
  EXPECT_FALSE(parse_http_url("http://u@a/", &why));
}

TEST(OcspSubject, TakesTheResponderFromTheLeafAndTheIssuerFromTheChain) {
  OcspPki pki;
  EXPECT_EQ(responder_url(pki.leaf.cert), OcspPki::responder);
  EXPECT_EQ(responder_url(pki.plain_leaf.cert), "");
  std::string why;
  auto s = Subject::from_chain_file(pki.chain_file("ok.pem", {pki.leaf.cert, pki.ca.cert}), "", why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->responder(), OcspPki::responder);

  EXPECT_FALSE(Subject::from_chain_file(pki.chain_file("alone.pem", {pki.leaf.cert}), "", why));
  EXPECT_NE(why.find("holds no issuer certificate after the leaf"), std::string::npos) << why;
  const auto plain = pki.chain_file("plain.pem", {pki.plain_leaf.cert, pki.ca.cert});
  EXPECT_FALSE(Subject::from_chain_file(plain, "", why));
  EXPECT_EQ(why, "the certificate names no http:// OCSP responder");
  const auto overridden = Subject::from_chain_file(plain, "http://127.0.0.1:9/", why);
  ASSERT_TRUE(overridden) << why;
  EXPECT_EQ(overridden->responder(), "http://127.0.0.1:9/");  // the override
}

TEST(OcspSubject, RequestAsksForTheLeafByItsIssuer) {
  OcspPki pki;
  std::string why;
  auto s = Subject::from_chain_file(pki.chain_file("ok.pem", {pki.leaf.cert, pki.ca.cert}), "", why);
  ASSERT_TRUE(s);
  const auto der = s->request();
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  OCSP_REQUEST* req = d2i_OCSP_REQUEST(nullptr, &p, static_cast<long>(der.size()));
  ASSERT_NE(req, nullptr);
  ASSERT_EQ(OCSP_request_onereq_count(req), 1);
  OCSP_CERTID* expected = OCSP_cert_to_id(EVP_sha1(), pki.leaf.cert, pki.ca.cert);
  EXPECT_EQ(OCSP_id_cmp(OCSP_onereq_get0_id(OCSP_request_onereq_get0(req, 0)), expected), 0);
  OCSP_CERTID_free(expected);
  OCSP_REQUEST_free(req);
}

class OcspVerify : public ::testing::Test {
protected:
  OcspPki pki;
  std::string why;
  Subject subject = *Subject::from_chain_file(pki.chain_file("ok.pem", {pki.leaf.cert, pki.ca.cert}), "", why);
  std::variant<Response, std::string> verify(const OcspPki::Answer& a) {
    return subject.verify(pki.response(a, now), now);
  }
};

TEST_F(OcspVerify, AGoodAnswerSignedByTheIssuerKeepsItsBytesAndTimes) {
  const auto der = pki.response({}, now);
  const auto v = subject.verify(der, now);
  ASSERT_EQ(failure(v), "(verified)");
  const auto& r = std::get<Response>(v);
  EXPECT_EQ(r.status, CertStatus::good);
  EXPECT_EQ(r.der, der);
  EXPECT_EQ(r.this_update, now - 60);
  EXPECT_EQ(r.next_update, now + 3600);
}

TEST_F(OcspVerify, RevokedAndUnknownAreWhatTheResponderSaid) {
  auto v = verify({.status = V_OCSP_CERTSTATUS_REVOKED});
  ASSERT_EQ(failure(v), "(verified)");
  EXPECT_EQ(std::get<Response>(v).status, CertStatus::revoked);
  v = verify({.status = V_OCSP_CERTSTATUS_UNKNOWN});
  ASSERT_EQ(failure(v), "(verified)");
  EXPECT_EQ(std::get<Response>(v).status, CertStatus::unknown);
}

TEST_F(OcspVerify, ADelegatedResponderOfTheIssuerIsTrusted) {
  EXPECT_EQ(failure(verify({.signer = &pki.delegated})), "(verified)");
}

TEST_F(OcspVerify, AnyOtherSignerIsRefused) {
  EXPECT_NE(failure(verify({.signer = &pki.stranger})).find("signature does not verify against the issuer"),
            std::string::npos);
  // Signed by the CA's leaf, which has no OCSPSigning purpose.
  EXPECT_NE(failure(verify({.signer = &pki.plain_leaf})).find("signature does not verify"), std::string::npos);
}

TEST_F(OcspVerify, AnAnswerAboutAnotherCertificateIsRefused) {
  EXPECT_EQ(failure(verify({.about = pki.plain_leaf.cert})), "the response does not cover this certificate");
}

TEST_F(OcspVerify, AnUnsuccessfulOrGarbledAnswerIsRefused) {
  EXPECT_EQ(failure(verify({.response_status = OCSP_RESPONSE_STATUS_TRYLATER})), "responder answered trylater");
  EXPECT_EQ(failure(subject.verify("not DER", now)), "not a DER OCSP response");
}

TEST_F(OcspVerify, FreshnessThisUpdateWithinSkewNextUpdateAhead) {
  EXPECT_EQ(failure(verify({.this_update = allowed_skew})), "(verified)");
  EXPECT_EQ(failure(verify({.this_update = allowed_skew + 1})), "thisUpdate is in the future");
  EXPECT_EQ(failure(verify({.this_update = -7200, .next_update = 0})), "nextUpdate has passed");
  EXPECT_EQ(failure(verify({.this_update = -7200, .next_update = 1})), "(verified)");
  EXPECT_EQ(failure(verify({.this_update = -max_age_without_next_update, .next_update = std::nullopt})), "too old");
  const auto v = verify({.this_update = -max_age_without_next_update + 1, .next_update = std::nullopt});
  ASSERT_EQ(failure(v), "(verified)");
  EXPECT_FALSE(std::get<Response>(v).next_update);
}

TEST(OcspFreshness, StapleableUntilNextUpdateOrADayWithoutOne) {
  Response r;
  r.this_update = now - 100;
  r.next_update = now + 50;
  EXPECT_TRUE(stapleable(r, now + 49));
  EXPECT_FALSE(stapleable(r, now + 50));
  r.next_update.reset();
  EXPECT_EQ(r.expires(), now - 100 + 24 * 3600);
  EXPECT_TRUE(stapleable(r, now - 100 + 24 * 3600 - 1));
  EXPECT_FALSE(stapleable(r, now - 100 + 24 * 3600));
}

TEST(OcspSchedule, RefreshAtHalfTheTimeToNextUpdate) {
  Response r;
  r.this_update = now;
  r.next_update = now + 7 * 24 * 3600;
  EXPECT_EQ(refresh_after(r, now), 24 * 3600);  // at most daily
  r.next_update = now + 4 * 3600;
  EXPECT_EQ(refresh_after(r, now), 2 * 3600);
  r.next_update = now + 60;
  EXPECT_EQ(refresh_after(r, now), 30);
  r.next_update = now + 12;
  EXPECT_EQ(refresh_after(r, now), min_refresh);  // a responder is not hammered
  r.next_update.reset();
  EXPECT_EQ(refresh_after(r, now), 3600);
}

TEST(OcspSchedule, RetriesBackOffAndComeBeforeTheStapleExpires) {
  const UnixTime expected[] = {5, 10, 20, 40, 80, 160, 320, 600, 600};
  for (unsigned i = 0; i < std::size(expected); ++i) EXPECT_EQ(retry_after(i + 1, nullptr, now), expected[i]) << i;
  Response r;
  r.this_update = now - 3600;
  r.next_update = now + 100;
  EXPECT_EQ(retry_after(9, &r, now), 50);  // half of what the staple has left
  r.next_update = now + 4;
  EXPECT_EQ(retry_after(9, &r, now), first_retry);
  r.next_update = now - 1;  // expired: the back-off alone
  EXPECT_EQ(retry_after(9, &r, now), max_retry);
}

}  // namespace
}  // namespace sluice::tls::ocsp
