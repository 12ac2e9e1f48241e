// OCSP stapling in the handshake (tls/ocsp_stapler.hpp): a listener's certificate staples the
// response its OcspStaple holds, to a client that asks, while it has not expired; the stapler
// hands the same staple to every context of one certificate (a reload keeps it) and none to a
// certificate without a responder. The fetching itself is covered by integration/test_tls_ocsp.py.
#include "sluice/tls/ocsp_stapler.hpp"

#include <openssl/ssl.h>

#include <ctime>

#include <gtest/gtest.h>

#include "ocsp_pki.hpp"
#include "sluice/tls/context.hpp"

namespace sluice::tls {
namespace {

using testing::OcspPki;

// One in-memory handshake with a client asking for the certificate status: the stapled bytes
// ("" when none).
std::string stapled(ServerContext& server) {
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL* client = SSL_new(client_ctx);
  SSL* srv = SSL_new(server.context().native_handle());
  BIO *a = nullptr, *b = nullptr;
  BIO_new_bio_pair(&a, 0, &b, 0);
  SSL_set_bio(srv, a, a);
  SSL_set_bio(client, b, b);
  SSL_set_accept_state(srv);
  SSL_set_connect_state(client);
  SSL_set_tlsext_status_type(client, TLSEXT_STATUSTYPE_ocsp);
  SSL_set_tlsext_host_name(client, "leaf.test");
  int done = 0;
  for (int i = 0; i < 20 && done != 2; ++i) done = (SSL_do_handshake(client) == 1) + (SSL_do_handshake(srv) == 1);
  EXPECT_EQ(done, 2) << "handshake";
  const unsigned char* der = nullptr;
  const long n = SSL_get_tlsext_status_ocsp_resp(client, &der);
  std::string out = n > 0 ? std::string(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n)) : "";
  SSL_free(client);
  SSL_free(srv);
  SSL_CTX_free(client_ctx);
  return out;
}

class OcspStapling : public ::testing::Test {
protected:
  OcspPki pki;
  boost::asio::io_context io;  // never run: no fetch happens, the test publishes by hand
  OcspStapler stapler{io};
  std::string key = write_key();
  std::string chain = pki.chain_file("leaf.pem", {pki.leaf.cert, pki.ca.cert});

  std::string write_key() {
    const auto path = pki.chain_file("unused", {}) + ".key";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    PEM_write_PrivateKey(f, pki.leaf.key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    return path;
  }
  ServerSettings settings() {
    ServerSettings s;
    s.certificates.push_back({chain, key, ""});
    s.ocsp = &stapler;
    return s;
  }
  static std::shared_ptr<const ocsp::Response> response(std::string der, ocsp::UnixTime next_update) {
    auto r = std::make_shared<ocsp::Response>();
    r->der = std::move(der);
    r->status = ocsp::CertStatus::good;
    r->this_update = static_cast<ocsp::UnixTime>(std::time(nullptr)) - 60;
    r->next_update = next_update;
    return r;
  }
  ocsp::UnixTime now() const { return static_cast<ocsp::UnixTime>(std::time(nullptr)); }
};

TEST_F(OcspStapling, StaplesTheCurrentResponseUntilItExpires) {
  ServerContext server(settings());
  auto staple = stapler.watch(chain, "");
  ASSERT_NE(staple, nullptr);
  EXPECT_EQ(stapled(server), "");  // nothing fetched yet: no staple, the handshake goes on
  staple->publish(response("response bytes", now() + 3600));
  EXPECT_EQ(stapled(server), "response bytes");
  staple->publish(response("expired bytes", now() - 1));
  EXPECT_EQ(stapled(server), "");
}

TEST_F(OcspStapling, OneStaplePerCertificateAcrossContexts) {
  auto first = std::make_unique<ServerContext>(settings());
  const auto staple = stapler.watch(chain, "");
  staple->publish(response("kept", now() + 3600));
  ServerContext reloaded(settings());  // a reload builds a new context for the same file
  EXPECT_EQ(stapled(reloaded), "kept");
  EXPECT_EQ(stapler.staples().size(), 1u);
  first.reset();
  EXPECT_EQ(stapled(reloaded), "kept");
}

TEST_F(OcspStapling, OffOrWithoutAResponderNothingIsWatched) {
  auto s = settings();
  s.ocsp_stapling = false;
  ServerContext off(s);
  EXPECT_TRUE(stapler.staples().empty());
  EXPECT_EQ(stapler.watch(pki.chain_file("plain.pem", {pki.plain_leaf.cert, pki.ca.cert}), ""), nullptr);
  EXPECT_EQ(stapler.watch(pki.chain_file("alone.pem", {pki.leaf.cert}), ""), nullptr);
  EXPECT_TRUE(stapler.staples().empty());
}

}  // namespace
}  // namespace sluice::tls
