// An ACME certificate's live state: the renewal rule, the retry back-off, a stored certificate
// reused at start, an installed one handed to every listener, and the challenge answers.
#include "sluice/tls/acme_slot.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "sluice/tls/acme_challenge.hpp"
#include "test_certs.hpp"

namespace sluice::tls::acme {
namespace {

using namespace std::chrono_literals;

TEST(AcmeRenewal, RenewsWithAThirdOfTheLifetimeLeft) {
  const SystemTime issued{std::chrono::hours(24 * 1000)};
  // 90 days: renewed 30 days before the end (day 60), as Let's Encrypt advises.
  EXPECT_EQ(renewal_time(issued, issued + 90 * 24h), issued + 60 * 24h);
  // A short-lived certificate (6 days, or a test CA's minutes) keeps the same proportion.
  EXPECT_EQ(renewal_time(issued, issued + 6min), issued + 4min);
}

TEST(AcmeRenewal, FailuresBackOffFromAMinuteToADay) {
  EXPECT_EQ(retry_delay(1), 60s);
  EXPECT_EQ(retry_delay(2), 120s);
  EXPECT_EQ(retry_delay(5), 960s);
  EXPECT_EQ(retry_delay(11), 61440s);
  EXPECT_EQ(retry_delay(12), 24h);  // 60 * 2048 s would be over a day
  EXPECT_EQ(retry_delay(1000), 24h);
}

class AcmeSlotTest : public ::testing::Test {
protected:
  testing::TestCerts certs;
  std::string storage = certs.dir() + "/acme";
  void store(const testing::TestCerts::Pair& pair, const std::string& domain) {
    std::filesystem::create_directories(storage + "/" + domain);
    std::filesystem::copy_file(pair.cert, storage + "/" + domain + "/cert.pem");
    std::filesystem::copy_file(pair.key, storage + "/" + domain + "/key.pem");
  }
};

TEST_F(AcmeSlotTest, StoredValidCertificateIsServedAtStart) {
  store(certs.leaf("app", "DNS:app.test"), "app.test");
  Slot slot({"App.Test"}, storage);
  EXPECT_TRUE(slot.issued());
  EXPECT_EQ(slot.cert_file(), storage + "/app.test/cert.pem");
  int installs = 0;
  slot.subscribe(this, [&] {
    ++installs;
    return std::string();
  });
  EXPECT_EQ(installs, 1);  // a listener made now shows it at once
  EXPECT_EQ(slot.install(std::chrono::system_clock::now() + 24h), "");
  EXPECT_EQ(installs, 2);
  slot.unsubscribe(this);
  slot.install(std::chrono::system_clock::now() + 24h);
  EXPECT_EQ(installs, 2);
}

TEST_F(AcmeSlotTest, ExpiredOrMissingCertificateIsOrdered) {
  Slot missing({"app.test"}, storage);
  EXPECT_FALSE(missing.issued());
  store(certs.leaf("old", "DNS:old.test", -7200, -60), "old.test");
  Slot expired({"old.test"}, storage);
  EXPECT_FALSE(expired.issued());
}

TEST_F(AcmeSlotTest, ServesItsDomainsCaseInsensitively) {
  Slot slot({"app.test", "www.app.test"}, storage);
  EXPECT_TRUE(slot.serves("WWW.app.TEST"));
  EXPECT_FALSE(slot.serves("other.test"));
  EXPECT_FALSE(slot.serves("app.tes"));
}

TEST_F(AcmeSlotTest, HttpChallengeAnsweredOnlyForItsTokenUntilCleared) {
  const auto slot = slot_for({"http.test"}, storage);
  slot->set_http_answer("tok123", "tok123.thumb");
  EXPECT_EQ(http_challenge_answer("/.well-known/acme-challenge/tok123"), "tok123.thumb");
  EXPECT_EQ(http_challenge_answer("/.well-known/acme-challenge/other"), std::nullopt);
  EXPECT_EQ(http_challenge_answer("/tok123"), std::nullopt);
  slot->clear_challenges();
  EXPECT_EQ(http_challenge_answer("/.well-known/acme-challenge/tok123"), std::nullopt);
}

TEST(AcmeClientHello, FindsAcmeTlsAmongOfferedProtocolsAndTheServerName) {
  const unsigned char alpn[] = {0, 14, 2, 'h', '2', 10, 'a', 'c', 'm', 'e', '-', 't', 'l', 's', '/', '1'};
  EXPECT_TRUE(alpn_offers(alpn, sizeof alpn, "acme-tls/1"));
  EXPECT_TRUE(alpn_offers(alpn, sizeof alpn, "h2"));
  EXPECT_FALSE(alpn_offers(alpn, sizeof alpn, "http/1.1"));
  EXPECT_FALSE(alpn_offers(alpn, sizeof alpn - 1, "acme-tls/1"));  // truncated: not trusted
  const unsigned char sni[] = {0, 11, 0, 0, 8, 'a', 'p', 'p', '.', 't', 'e', 's', 't'};
  EXPECT_EQ(sni_host_name(sni, sizeof sni), "app.test");
  EXPECT_EQ(sni_host_name(sni, 6), "");
}

}  // namespace
}  // namespace sluice::tls::acme
