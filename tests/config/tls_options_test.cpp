// TLS keys: [[server.tls]] listeners and the upstream TLS options, with certificates made at test
// time. Errors name the file and sit at the key's line, at start-up and at every reload alike
// (reload runs the same loader).
#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "../tls/test_certs.hpp"
#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using namespace testing;  // load, errors_of
using sluice::testing::TestCerts;

std::string listener(const std::string& cert, const std::string& key, const std::string& extra = "") {
  return "[server]\nlisten = [\"127.0.0.1:0\"]\n[[server.tls]]\nlisten = [\"127.0.0.1:8443\"]\n"
         "certificates = [ { cert = \"" + cert + "\", key = \"" + key + "\" } ]\n" + extra;
}

TEST(ConfigTls, ListenerIsRead) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  const auto b = certs.leaf("b", "DNS:*.b.test");
  const auto r = load_with_upstream(
      "[server]\nlisten = []\n[[server.tls]]\nlisten = [\"127.0.0.1:8443\", \"[::1]:8443\"]\n"
      "certificates = [ { cert = \"" + a.cert + "\", key = \"" + a.key + "\" },\n"
      "  { cert = \"" + b.cert + "\", key = \"" + b.key + "\" } ]\n"
      "min_version = \"1.3\"\nciphers = \"ECDHE-RSA-AES128-GCM-SHA256\"\n");
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  const auto& server = r.config->server;
  EXPECT_TRUE(server.listen.empty());  // TLS only
  ASSERT_EQ(server.tls.size(), 1u);
  const auto& t = server.tls[0];
  ASSERT_EQ(t.listen.size(), 2u);
  EXPECT_EQ(t.listen[1].to_string(), "[::1]:8443");
  ASSERT_EQ(t.certificates.size(), 2u);
  EXPECT_EQ(t.certificates[1].key, b.key);
  EXPECT_TRUE(t.min_tls13);
  EXPECT_EQ(t.ciphers, "ECDHE-RSA-AES128-GCM-SHA256");
}

TEST(ConfigTls, DefaultsAreTls12AndTheBuiltInCipherList) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  const auto r = load_with_upstream(listener(a.cert, a.key));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_FALSE(r.config->server.tls[0].min_tls13);
  EXPECT_TRUE(r.config->server.tls[0].ciphers.empty());
}

TEST(ConfigTls, BadFilesAreErrorsNamingTheFileAtItsKey) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  const auto other = certs.leaf("other", "DNS:other.test");
  const auto expired = certs.leaf("expired", "DNS:old.test", -7200, -3600);
  const auto missing = certs.dir() + "/missing.pem";
  const auto cases = std::vector<std::pair<std::string, std::string>>{
      {listener(missing, a.key),
       "test.toml:5:27: server.tls[0].certificates[0].cert: cannot read '" + missing +
           "': No such file or directory"},
      {listener(a.cert, other.key),
       "test.toml:5:" + std::to_string(37 + a.cert.size()) + ": server.tls[0].certificates[0].key: '" +
           other.key + "': key does not match the certificate in '" + a.cert + "'"},
      {listener(expired.cert, expired.key),
       "test.toml:5:27: server.tls[0].certificates[0].cert: '" + expired.cert +
           "': certificate expired on "},
      {listener(a.key, a.key), "test.toml:5:27: server.tls[0].certificates[0].cert: '" + a.key +
                                   "': no PEM certificate found"},
  };
  for (const auto& [text, expected] : cases) {
    const auto errors = errors_of(load_with_upstream(text));
    ASSERT_EQ(errors.size(), 1u) << text;
    EXPECT_TRUE(errors[0].starts_with(expected)) << errors[0] << "\nexpected: " << expected;
  }
}

TEST(ConfigTls, ListenerShapeErrors) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "min_version = \"1.1\"\n"))),
            Errors{"test.toml:6:15: server.tls[0].min_version: unknown TLS version '1.1'; did you "
                   "mean '1.2'?"});
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "ciphers = \"NOPE\"\n"))),
            Errors{"test.toml:6:11: server.tls[0].ciphers: no cipher in 'NOPE' is known to OpenSSL"});
  EXPECT_EQ(errors_of(load_with_upstream("[[server.tls]]\nlisten = \"127.0.0.1:8443\"\n")),
            Errors{"test.toml:1:1: server.tls[0].certificates: required key is missing (at least "
                   "one { cert, key } pair, or acme = { ... })"});
  EXPECT_EQ(errors_of(load_with_upstream(
                "[[server.tls]]\nlisten = \"127.0.0.1:8443\"\ncertificates = [ { cert = \"" + a.cert + "\" } ]\n")),
            Errors{"test.toml:3:18: server.tls[0].certificates[0].key: required key is missing (the "
                   "PEM private key file)"});
  // A TLS listener cannot share an address with a plain one.
  EXPECT_EQ(errors_of(load_with_upstream("[server]\nlisten = \"127.0.0.1:8443\"\n" +
                                         listener(a.cert, a.key).substr(std::string("[server]\nlisten = [\"127.0.0.1:0\"]\n").size()))),
            Errors{"test.toml:4:11: server.tls[0].listen[0]: duplicate listen address 127.0.0.1:8443 "
                   "(also server.listen)"});
  EXPECT_EQ(errors_of(load_with_upstream("[server]\nlisten = []\n")),
            Errors{"test.toml:2:10: server.listen: at least one listen address is required"});
}

TEST(ConfigTls, ClientCertificateKeysAreRead) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  auto r = load_with_upstream(listener(a.cert, a.key));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].verify_client, tls::VerifyClient::off);  // today's behaviour
  r = load_with_upstream(listener(a.cert, a.key,
                                  "client_ca_file = \"" + certs.ca_file() + "\"\nverify_client = \"required\"\n"
                                  "[[route]]\npath_prefix = \"/\"\nupstream = \"app\"\nrequire_client_cert = true\n"));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].verify_client, tls::VerifyClient::required);
  EXPECT_EQ(r.config->server.tls[0].client_ca_file, certs.ca_file());
  ASSERT_EQ(r.config->routes.size(), 1u);
  EXPECT_TRUE(r.config->routes[0].require_client_cert);
}

TEST(ConfigTls, ClientCertificateKeyErrors) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  const auto missing = certs.dir() + "/missing.pem";
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "verify_client = \"optional\"\n"))),
            Errors{"test.toml:6:17: server.tls[0].verify_client: verify_client = \"optional\" needs "
                   "client_ca_file (the CAs client certificates must chain to)"});
  EXPECT_EQ(errors_of(load_with_upstream(
                listener(a.cert, a.key, "client_ca_file = \"" + missing + "\"\nverify_client = \"required\"\n"))),
            Errors{"test.toml:6:18: server.tls[0].client_ca_file: cannot read '" + missing +
                   "': No such file or directory"});
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key,
                                                  "client_ca_file = \"" + a.key + "\"\nverify_client = \"required\"\n"))),
            Errors{"test.toml:6:18: server.tls[0].client_ca_file: '" + a.key + "': no PEM certificate found"});
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "verify_client = \"on\"\n"))),
            Errors{"test.toml:6:17: server.tls[0].verify_client: unknown verify_client mode 'on'; expected one "
                   "of: off, optional, required"});
}

TEST(ConfigTls, SessionTicketKeyFileIsReadAndCheckedAtItsKey) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  auto r = load_with_upstream(listener(a.cert, a.key));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_TRUE(r.config->server.tls[0].session_ticket_key_file.empty());  // OpenSSL's random keys
  const auto keys = certs.file("ticket.key", std::string(160, 'k'));
  r = load_with_upstream(listener(a.cert, a.key, "session_ticket_key_file = \"" + keys + "\"\n"));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].session_ticket_key_file, keys);
  const auto missing = certs.dir() + "/missing.key";
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "session_ticket_key_file = \"" + missing + "\"\n"))),
            Errors{"test.toml:6:27: server.tls[0].session_ticket_key_file: cannot read '" + missing +
                   "': No such file or directory"});
  const auto short_key = certs.file("short.key", std::string(48, 'k'));
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "session_ticket_key_file = \"" + short_key + "\"\n"))),
            Errors{"test.toml:6:27: server.tls[0].session_ticket_key_file: '" + short_key +
                   "': must hold one or more 80-byte keys (openssl rand 80), got 48 bytes"});
}

TEST(ConfigTls, OcspStaplingIsOnByDefaultAndAResponderMustBeHttp) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  auto r = load_with_upstream(listener(a.cert, a.key));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_TRUE(r.config->server.tls[0].ocsp_stapling);
  EXPECT_EQ(r.config->server.tls[0].certificates[0].ocsp_responder, "");  // the certificate's AIA
  r = load_with_upstream(listener(a.cert, a.key, "ocsp_stapling = false\n"));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_FALSE(r.config->server.tls[0].ocsp_stapling);

  const auto with_responder = [&](const std::string& url) {
    return "[server]\nlisten = [\"127.0.0.1:0\"]\n[[server.tls]]\nlisten = [\"127.0.0.1:8443\"]\n"
           "certificates = [ { cert = \"" + a.cert + "\", key = \"" + a.key + "\", ocsp_responder = \"" + url +
           "\" } ]\n";
  };
  r = load_with_upstream(with_responder("http://ocsp.internal:8080/"));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].certificates[0].ocsp_responder, "http://ocsp.internal:8080/");
  const std::string text = with_responder("https://ocsp.internal/");
  const auto line = text.substr(text.find("certificates"));
  const auto column = std::to_string(line.find("\"https") + 1);
  EXPECT_EQ(errors_of(load_with_upstream(text)),
            Errors{"test.toml:5:" + column + ": server.tls[0].certificates[0].ocsp_responder: 'https://ocsp.internal/' "
                   "must be an http:// URL (OCSP responses are signed; https:// is not supported)"});
}

TEST(ConfigTls, UpstreamTlsKeys) {
  TestCerts certs;
  const auto client = certs.leaf("client", "DNS:client.test");
  const auto r = load("[upstreams.app]\ntls = true\ntls_verify = false\ntls_ca_file = \"" +
                      certs.ca_file() + "\"\ntls_server_name = \"origin.internal\"\ntls_cert = \"" +
                      client.cert + "\"\ntls_key = \"" + client.key +
                      "\"\n[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n");
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  const auto& u = r.config->upstreams[0];
  EXPECT_TRUE(u.tls);
  EXPECT_FALSE(u.tls_verify);
  EXPECT_EQ(u.tls_ca_file, certs.ca_file());
  EXPECT_EQ(u.tls_server_name, "origin.internal");
  EXPECT_EQ(u.tls_cert, client.cert);
  EXPECT_TRUE(u.servers[0].tls);  // from the upstream's `tls`
}

TEST(ConfigTls, HttpsAddressPutsTlsOnOneServer) {
  const auto r = load(
      "[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"https://127.0.0.1:9443\"\n"
      "[[upstreams.app.servers]]\naddress = \"http://127.0.0.1:9001\"\n"
      "[[upstreams.app.servers]]\naddress = \"127.0.0.1:9002\"\n");
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  const auto& s = r.config->upstreams[0].servers;
  EXPECT_TRUE(s[0].tls);
  EXPECT_EQ(s[0].address.to_string(), "127.0.0.1:9443");
  EXPECT_EQ(s[0].identity(), "127.0.0.1:9443");
  EXPECT_FALSE(s[1].tls);
  EXPECT_FALSE(s[2].tls);
  EXPECT_TRUE(r.config->upstreams[0].tls_verify);  // verification is on unless turned off
  EXPECT_EQ(errors_of(load("[upstreams.app]\n[[upstreams.app.servers]]\naddress = \"ftp://h:1\"\n")),
            Errors{"test.toml:3:11: upstreams.app.servers[0].address: unknown scheme in 'ftp://h:1'; "
                   "expected host:port, http://host:port or https://host:port"});
}

TEST(ConfigTls, UpstreamTlsFileErrors) {
  TestCerts certs;
  const auto client = certs.leaf("client", "DNS:client.test");
  const auto empty = certs.file("empty.pem", "");
  const std::string head = "[upstreams.app]\ntls = true\n";
  const std::string servers = "[[upstreams.app.servers]]\naddress = \"127.0.0.1:9001\"\n";
  EXPECT_EQ(errors_of(load(head + "tls_ca_file = \"" + empty + "\"\n" + servers)),
            Errors{"test.toml:3:15: upstreams.app.tls_ca_file: '" + empty + "': no PEM certificate found"});
  EXPECT_EQ(errors_of(load(head + "tls_cert = \"" + client.cert + "\"\n" + servers)),
            Errors{"test.toml:3:12: upstreams.app.tls_cert: tls_cert and tls_key go together (a "
                   "client certificate and its key)"});
  EXPECT_EQ(errors_of(load(head + "tls_cert = \"" + client.cert + "\"\ntls_key = \"" + certs.ca_file() +
                           "\"\n" + servers)),
            Errors{"test.toml:4:11: upstreams.app.tls_key: '" + certs.ca_file() +
                   "': no PEM private key found (an encrypted key is not supported)"});
  EXPECT_EQ(errors_of(load(head + "tls_server_name = \"bad name\"\n" + servers)),
            Errors{"test.toml:3:19: upstreams.app.tls_server_name: invalid server name 'bad name'"});
}

// acme = { ... } instead of certificates, and [acme] storage: read, defaulted, and each bad
// value an error at its key.
TEST(ConfigTls, AcmeTableStandsInForCertificates) {
  const std::string head = "[acme]\nstorage = \"/tmp/acme\"\n[[server.tls]]\nlisten = \"127.0.0.1:8443\"\n";
  auto r = load_with_upstream(head + "acme = { domains = [\"a.test\"], directory = \"https://ca.test/dir\" }\n");
  ASSERT_TRUE(r.ok()) << errors_of(r).front();
  const auto& acme = *r.config->server.tls[0].acme;
  EXPECT_EQ(acme.domains, std::vector<std::string>{"a.test"});
  EXPECT_EQ(acme.challenge, tls::AcmeChallenge::tls_alpn_01);
  EXPECT_EQ(r.config->acme.storage, "/tmp/acme");
  EXPECT_EQ(errors_of(load_with_upstream(head + "acme = { domains = [], directory = \"http://ca.test/dir\", "
                                                "challenge = \"dns-01\" }\n")),
            (Errors{"test.toml:5:20: server.tls[0].acme.domains: at least one domain is required",
                    "test.toml:5:36: server.tls[0].acme.directory: must be an https:// URL, got 'http://ca.test/dir'",
                    "test.toml:5:70: server.tls[0].acme.challenge: unknown ACME challenge 'dns-01'; expected one "
                    "of: tls-alpn-01, http-01"}));
  EXPECT_EQ(errors_of(load_with_upstream(head + "acme = { directory = \"https://ca.test/dir\" }\n")),
            Errors{"test.toml:5:8: server.tls[0].acme.domains: required key is missing (the names to order a "
                   "certificate for)"});
  EXPECT_EQ(errors_of(load_with_upstream("[acme]\nstorage = \"acme\"\n")),
            Errors{"test.toml:2:11: acme.storage: must be an absolute directory path, got 'acme'"});
}

}  // namespace
}  // namespace sluice::config

namespace sluice::config {
namespace {

TEST(ConfigTls, AlpnOffersH2FirstByDefaultHttp11OnlyWhenToldAndHttp11MustStay) {
  TestCerts certs;
  const auto a = certs.leaf("a", "DNS:a.test");
  auto r = load_with_upstream(listener(a.cert, a.key));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].alpn, (std::vector<Alpn>{Alpn::h2, Alpn::http11}));
  EXPECT_FALSE(r.config->server.h2c);
  r = load_with_upstream(listener(a.cert, a.key, "alpn = [\"http/1.1\"]\n"));
  ASSERT_TRUE(r.ok()) << errors_of(r)[0];
  EXPECT_EQ(r.config->server.tls[0].alpn, std::vector<Alpn>{Alpn::http11});
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "alpn = [\"h2\"]\n"))),
            Errors{"test.toml:6:8: server.tls[0].alpn: must include \"http/1.1\" (clients without ALPN speak it); "
                   "[\"http/1.1\"] turns HTTP/2 off"});
  EXPECT_EQ(errors_of(load_with_upstream(listener(a.cert, a.key, "alpn = [\"h3\", \"http/1.1\"]\n"))),
            Errors{"test.toml:6:9: server.tls[0].alpn[0]: unknown ALPN protocol 'h3'; did you mean 'h2'?"});
}

}  // namespace
}  // namespace sluice::config
