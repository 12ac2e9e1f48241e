#include "sluice/tls/context.hpp"

#include <algorithm>
#include <filesystem>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "sluice/tls/acme_challenge.hpp"
#include "sluice/tls/acme_crypto.hpp"
#include "sluice/tls/acme_slot.hpp"
#include "sluice/tls/stream.hpp"
#include "test_certs.hpp"

namespace sluice::tls {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using testing::TestCerts;

TEST(CertificateSelector, ExactNamesThenOneLabelWildcardsElseTheFirst) {
  CertificateSelector s;
  s.add("example.com", 0);
  s.add("API.example.com", 1);
  s.add("*.example.com", 2);
  s.add("*.api.example.com", 3);
  s.add("api.example.com", 4);  // listed again later: the earlier certificate keeps it
  EXPECT_EQ(s.pick("api.example.com"), 1u);
  EXPECT_EQ(s.pick("Api.Example.COM"), 1u);  // DNS names compare case-insensitively
  EXPECT_EQ(s.pick("www.example.com"), 2u);
  EXPECT_EQ(s.pick("v1.api.example.com"), 3u);
  EXPECT_EQ(s.pick("a.b.c.example.com"), 0u);  // a wildcard covers one label only
  EXPECT_EQ(s.pick("example.com"), 0u);
  EXPECT_EQ(s.pick("other.test"), 0u);
  EXPECT_EQ(s.pick(""), 0u);
  EXPECT_EQ(s.pick(".example.com"), 0u);  // an empty label matches nothing
}

TEST(CertificateNames, DnsSubjectAltNamesElseTheCommonName) {
  TestCerts certs;
  const auto with_sans = certs.leaf("one", "DNS:a.test,DNS:*.b.test,IP:127.0.0.1");
  EXPECT_EQ(certificate_names(with_sans.cert), (std::vector<std::string>{"a.test", "*.b.test"}));
  const auto cn_only = certs.leaf("cn.test", "");
  EXPECT_EQ(certificate_names(cn_only.cert), (std::vector<std::string>{"cn.test"}));
}

TEST(CheckCertifiedKey, AcceptsAMatchingValidPair) {
  TestCerts certs;
  const auto p = certs.leaf("ok", "DNS:ok.test");
  EXPECT_FALSE(check_certified_key(p.cert, p.key));
}

TEST(CheckCertifiedKey, NamesTheFileAndWhatIsWrongWithIt) {
  TestCerts certs;
  const auto p = certs.leaf("ok", "DNS:ok.test");
  const auto other = certs.leaf("other", "DNS:other.test");
  const auto garbage = certs.file("garbage.pem", "not a certificate\n");
  const auto missing = certs.dir() + "/missing.pem";
  using File = FileProblem::File;
  const auto expect = [](std::optional<FileProblem> got, File file, const std::string& text) {
    ASSERT_TRUE(got) << text;
    EXPECT_EQ(got->file, file) << got->message;
    EXPECT_NE(got->message.find(text), std::string::npos) << got->message;
  };
  expect(check_certified_key(missing, p.key), File::cert,
         "cannot read '" + missing + "': No such file or directory");
  expect(check_certified_key(garbage, p.key), File::cert, "'" + garbage + "': no PEM certificate found");
  expect(check_certified_key(p.cert, missing), File::key, "cannot read '" + missing + "'");
  expect(check_certified_key(p.cert, garbage), File::key, "'" + garbage + "': no PEM private key found");
  expect(check_certified_key(p.cert, other.key), File::key,
         "'" + other.key + "': key does not match the certificate in '" + p.cert + "'");
  // A key file given as the certificate: no certificate in it.
  expect(check_certified_key(p.key, p.key), File::cert, "no PEM certificate found");
}

TEST(CheckCertifiedKey, RefusesExpiredAndNotYetValidCertificates) {
  TestCerts certs;
  const auto expired = certs.leaf("expired", "DNS:old.test", -7200, -3600);
  const auto future = certs.leaf("future", "DNS:new.test", 3600, 7200);
  const auto e = check_certified_key(expired.cert, expired.key);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->file, FileProblem::File::cert);
  EXPECT_NE(e->message.find("certificate expired on"), std::string::npos) << e->message;
  const auto f = check_certified_key(future.cert, future.key);
  ASSERT_TRUE(f);
  EXPECT_NE(f->message.find("not valid before"), std::string::npos) << f->message;
}

TEST(CheckCaFile, NeedsAtLeastOneCertificate) {
  TestCerts certs;
  EXPECT_FALSE(check_ca_file(certs.ca_file()));
  const auto empty = certs.file("empty.pem", "");
  ASSERT_TRUE(check_ca_file(empty));
  EXPECT_NE(check_ca_file(empty)->find("no PEM certificate found"), std::string::npos);
}

TEST(CheckCipherList, RejectsUnknownCiphers) {
  EXPECT_FALSE(check_cipher_list(std::string(default_ciphers)));
  EXPECT_TRUE(check_cipher_list("NOT-A-CIPHER"));
}

// One handshake over loopback between a ServerContext and a ClientContext.
struct Outcome {
  boost::system::error_code client, server;
  std::string served_cn;  // common name of the certificate the client got
  std::string alpn;
  const char* verify = nullptr;
  int version = 0;
  ClientCertificate seen;  // what the server read of the client's certificate, when it shook hands
};

Outcome handshake(ServerContext& server, ClientContext& client, const std::string& name,
                  int client_max_version = 0, std::string_view alpn_wire = {}) {
  net::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  Stream s(io), c(io);
  Outcome out;
  acceptor.async_accept(s.socket(), [&](boost::system::error_code ec) {
    if (ec) return;
    s.start_tls(server.context());
    s.async_handshake(net::ssl::stream_base::server, [&](boost::system::error_code e) {
      out.server = e;
      if (!e) out.seen = read_client_certificate(s.tls()->native_handle());
    });
  });
  c.socket().async_connect(acceptor.local_endpoint(), [&](boost::system::error_code ec) {
    if (ec) return;
    c.start_tls(client.context());
    SSL* ssl = c.tls()->native_handle();
    if (client_max_version != 0) SSL_set_max_proto_version(ssl, client_max_version);
    if (!alpn_wire.empty())
      SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(alpn_wire.data()),
                          static_cast<unsigned>(alpn_wire.size()));
    client.prepare(ssl, name);
    c.async_handshake(net::ssl::stream_base::client, [&, ssl](boost::system::error_code e) {
      out.client = e;
      out.verify = verify_error(ssl);
      out.version = SSL_version(ssl);
      if (X509* peer = SSL_get1_peer_certificate(ssl)) {
        char cn[256] = {};
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
        out.served_cn = cn;
        X509_free(peer);
      }
      const unsigned char* alpn = nullptr;
      unsigned int len = 0;
      SSL_get0_alpn_selected(ssl, &alpn, &len);
      out.alpn.assign(reinterpret_cast<const char*>(alpn), len);
      boost::system::error_code ignored;
      if (e) s.close(ignored);
    });
  });
  io.run();
  return out;
}

ServerSettings listener(std::initializer_list<TestCerts::Pair> pairs) {
  ServerSettings c;
  for (const auto& p : pairs) c.certificates.push_back({p.cert, p.key});
  return c;
}

ClientSettings upstream_with_ca(const std::string& ca) {
  ClientSettings u;
  u.ca_file = ca;
  return u;
}

TEST(Handshake, SniPicksTheCertificateAndAlpnIsHttp11) {
  TestCerts certs;
  const auto first = certs.leaf("first", "DNS:first.test");
  const auto second = certs.leaf("second", "DNS:second.test,DNS:*.wild.test");
  ServerContext server(listener({first, second}));
  ClientContext client(upstream_with_ca(certs.ca_file()));
  const auto a = handshake(server, client, "second.test");
  EXPECT_FALSE(a.client) << a.client.message();
  EXPECT_EQ(a.served_cn, "second");
  EXPECT_EQ(a.alpn, "http/1.1");
  EXPECT_EQ(handshake(server, client, "x.wild.test").served_cn, "second");
  EXPECT_EQ(handshake(server, client, "first.test").served_cn, "first");
  // An unknown name gets the default (first) certificate, which then fails verification.
  const auto unknown = handshake(server, client, "unknown.test");
  EXPECT_TRUE(unknown.client);
  ASSERT_NE(unknown.verify, nullptr);
  EXPECT_STREQ(unknown.verify, "hostname mismatch");
}

// An ACME listener: its own certificate files serve their names; the ACME domain gets the
// placeholder until a certificate is installed, then that one, in the same ServerContext (no
// reload); a ClientHello offering "acme-tls/1" for a pending challenge gets the challenge
// certificate and that protocol.
TEST(Handshake, AcmeCertificateIsSwappedInAndChallengesAnswered) {
  TestCerts certs;
  const auto first = certs.leaf("first", "DNS:first.test");
  ServerSettings settings = listener({first});
  settings.acme = AcmeSettings{{"swap.acme.test"}, certs.dir() + "/acme", AcmeChallenge::tls_alpn_01};
  ServerContext server(settings);
  ClientContext client(upstream_with_ca(certs.ca_file()));
  // Nothing issued yet: the default certificate, which does not carry the name.
  const auto before = handshake(server, client, "swap.acme.test");
  ASSERT_NE(before.verify, nullptr);
  EXPECT_STREQ(before.verify, "hostname mismatch");

  const auto issued = certs.leaf("issued", "DNS:swap.acme.test");
  const auto slot = acme::slot_for({"swap.acme.test"}, certs.dir() + "/acme");
  std::filesystem::create_directories(slot->directory());
  std::filesystem::copy_file(issued.cert, slot->cert_file());
  std::filesystem::copy_file(issued.key, slot->key_file());
  ASSERT_EQ(slot->install(std::chrono::system_clock::now() + std::chrono::hours(24)), "");
  const auto swapped = handshake(server, client, "swap.acme.test");
  EXPECT_FALSE(swapped.client) << swapped.client.message();
  EXPECT_EQ(swapped.served_cn, "issued");
  EXPECT_EQ(handshake(server, client, "first.test").served_cn, "first");

  const auto key = acme::new_p256_key();
  const auto challenge = acme::challenge_certificate(key.get(), "swap.acme.test", "tok.thumb");
  slot->set_challenge("swap.acme.test", acme::challenge_context(key.get(), challenge.get()));
  ClientSettings no_verify;
  no_verify.verify = false;
  ClientContext validator(no_verify);
  const auto answer = handshake(server, validator, "swap.acme.test", 0, std::string_view("\x0a" "acme-tls/1"));
  EXPECT_FALSE(answer.client) << answer.client.message();
  EXPECT_EQ(answer.alpn, "acme-tls/1");
  EXPECT_EQ(answer.served_cn, "swap.acme.test");  // the self-signed challenge certificate
  // TLS 1.2 chooses the certificate before ALPN: the switch in the ClientHello callback holds.
  const auto answer12 = handshake(server, validator, "swap.acme.test", TLS1_2_VERSION, std::string_view("\x0a" "acme-tls/1"));
  EXPECT_FALSE(answer12.client) << answer12.client.message();
  EXPECT_EQ(answer12.alpn, "acme-tls/1");
  EXPECT_EQ(answer12.served_cn, "swap.acme.test");
  // An ordinary client meanwhile still gets the issued certificate.
  EXPECT_EQ(handshake(server, client, "swap.acme.test").served_cn, "issued");
  slot->clear_challenges();
}

TEST(Handshake, VerificationFailsClosedWithTheReason) {
  TestCerts certs;
  TestCerts other("another CA");
  const auto leaf = certs.leaf("srv", "DNS:srv.test,IP:127.0.0.1");
  ServerContext server(listener({leaf}));
  ClientContext wrong_ca(upstream_with_ca(other.ca_file()));
  const auto bad = handshake(server, wrong_ca, "srv.test");
  EXPECT_TRUE(bad.client);
  ASSERT_NE(bad.verify, nullptr);
  EXPECT_STREQ(bad.verify, "unable to get local issuer certificate");
  ClientContext right_ca(upstream_with_ca(certs.ca_file()));
  EXPECT_FALSE(handshake(server, right_ca, "127.0.0.1").client);  // IP SAN checked
  auto no_verify_cfg = upstream_with_ca(other.ca_file());
  no_verify_cfg.verify = false;
  ClientContext no_verify(no_verify_cfg);
  EXPECT_FALSE(handshake(server, no_verify, "srv.test").client);
}

TEST(Handshake, MinVersion13RefusesTls12Clients) {
  TestCerts certs;
  const auto leaf = certs.leaf("srv", "DNS:srv.test");
  auto cfg = listener({leaf});
  ClientContext client(upstream_with_ca(certs.ca_file()));
  {
    ServerContext server(cfg);
    const auto o = handshake(server, client, "srv.test", TLS1_2_VERSION);
    EXPECT_FALSE(o.client) << o.client.message();
    EXPECT_EQ(o.version, TLS1_2_VERSION);
  }
  cfg.min_tls13 = true;
  ServerContext server(cfg);
  EXPECT_TRUE(handshake(server, client, "srv.test", TLS1_2_VERSION).client);
  EXPECT_EQ(handshake(server, client, "srv.test").version, TLS1_3_VERSION);
}

// A listener asking for client certificates from `client_ca`, and a client showing `shown`.
struct ClientCertCase {
  TestCerts server_certs;
  TestCerts client_certs{"client CA"};
  TestCerts other{"other CA"};
  TestCerts::Pair leaf = server_certs.leaf("srv", "DNS:srv.test");

  Outcome run(VerifyClient mode, const TestCerts::Pair* shown, int client_max_version = 0) {
    auto cfg = listener({leaf});
    cfg.verify_client = mode;
    cfg.client_ca_file = client_certs.ca_file();
    ServerContext server(cfg);
    ClientContext client(upstream_with_ca(server_certs.ca_file()));
    // Straight into OpenSSL: ClientSettings refuses an expired certificate, which the test needs.
    SSL_CTX* native = client.context().native_handle();
    if (shown != nullptr && (SSL_CTX_use_certificate_file(native, shown->cert.c_str(), SSL_FILETYPE_PEM) != 1 ||
                             SSL_CTX_use_PrivateKey_file(native, shown->key.c_str(), SSL_FILETYPE_PEM) != 1))
      ADD_FAILURE() << "cannot load " << shown->cert;
    return handshake(server, client, "srv.test", client_max_version);
  }
};

TEST(ClientCertificates, OptionalLetsEveryClientInAndTellsWhatItShowed) {
  ClientCertCase c;
  const auto alice = c.client_certs.leaf("alice", "email:alice@example.com,DNS:alice.test");
  const auto expired = c.client_certs.leaf("bob", "DNS:bob.test", -7200, -3600);
  const auto stranger = c.other.leaf("mallory", "URI:spiffe://other/mallory");

  auto o = c.run(VerifyClient::optional, &alice);
  ASSERT_FALSE(o.server) << o.server.message();
  EXPECT_EQ(o.seen.verify, "SUCCESS");
  EXPECT_TRUE(o.seen.verified());
  EXPECT_EQ(o.seen.subject, "CN=alice");
  EXPECT_EQ(o.seen.san, "alice@example.com");  // the first of the certificate's names
  EXPECT_EQ(o.seen.fingerprint.size(), 64u);
  EXPECT_EQ(o.seen.fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos);

  o = c.run(VerifyClient::optional, &expired);
  ASSERT_FALSE(o.server) << o.server.message();
  EXPECT_EQ(o.seen.verify, "FAILED:certificate has expired");
  EXPECT_FALSE(o.seen.verified());
  EXPECT_EQ(o.seen.san, "bob.test");

  o = c.run(VerifyClient::optional, &stranger);
  ASSERT_FALSE(o.server) << o.server.message();
  EXPECT_EQ(o.seen.verify, "FAILED:unable to verify the first certificate");
  EXPECT_EQ(o.seen.subject, "CN=mallory");
  EXPECT_EQ(o.seen.san, "spiffe://other/mallory");

  o = c.run(VerifyClient::optional, nullptr);
  ASSERT_FALSE(o.server) << o.server.message();
  EXPECT_EQ(o.seen.verify, "NONE");
  EXPECT_TRUE(o.seen.subject.empty());
  EXPECT_TRUE(o.seen.fingerprint.empty());
}

TEST(ClientCertificates, RequiredFailsTheHandshakeOfAClientWithoutAValidOne) {
  ClientCertCase c;
  const auto alice = c.client_certs.leaf("alice", "DNS:alice.test");
  const auto expired = c.client_certs.leaf("bob", "DNS:bob.test", -7200, -3600);
  const auto stranger = c.other.leaf("mallory", "DNS:mallory.test");
  for (const int version : {TLS1_2_VERSION, 0}) {
    const auto ok = c.run(VerifyClient::required, &alice, version);
    EXPECT_FALSE(ok.server) << ok.server.message();
    EXPECT_EQ(ok.seen.verify, "SUCCESS");
    for (const auto* shown : {&expired, &stranger, static_cast<const TestCerts::Pair*>(nullptr)}) {
      const auto o = c.run(VerifyClient::required, shown, version);
      EXPECT_TRUE(o.server) << (shown != nullptr ? shown->cert : "no certificate") << " TLS " << version;
      // TLS 1.2: the client learns it in the handshake (the alert); TLS 1.3 tells it after.
      if (version == TLS1_2_VERSION) EXPECT_TRUE(o.client);
    }
  }
}

// A certificate is the client's own text: whatever its names hold, what the variables show is a
// valid header field value (no control byte, no space at either end), so no line is injected.
TEST(ClientCertificates, NamesWithControlBytesAreEscaped) {
  ClientCertCase c;
  const auto evil = c.other.leaf("evil\r\nX-Injected: 1 ", "email:a\tb@example.com ");
  const auto o = c.run(VerifyClient::optional, &evil);
  ASSERT_FALSE(o.server) << o.server.message();
  for (const auto& text : {o.seen.subject, o.seen.san, o.seen.verify}) {
    EXPECT_FALSE(text.empty());
    EXPECT_EQ(std::count_if(text.begin(), text.end(), [](char ch) { return ch < 0x20 || ch == 0x7f; }), 0) << text;
    EXPECT_NE(text.front(), ' ') << text;
    EXPECT_NE(text.back(), ' ') << text;
  }
  EXPECT_EQ(o.seen.san, "a\\x09b@example.com");
  EXPECT_EQ(o.seen.subject, "CN=evil\\0D\\0AX-Injected: 1\\\\x20");  // RFC 2253 escapes, then ours
}

TEST(ClientCertificates, OffAsksForNone) {
  ClientCertCase c;
  const auto alice = c.client_certs.leaf("alice", "DNS:alice.test");
  const auto o = c.run(VerifyClient::off, &alice);
  ASSERT_FALSE(o.server) << o.server.message();
  EXPECT_EQ(o.seen.verify, "NONE");  // the client was not asked, so it sent nothing
}

TEST(ServerContext, ThrowsNamingTheFile) {
  TestCerts certs;
  const auto p = certs.leaf("srv", "DNS:srv.test");
  const auto other = certs.leaf("other", "DNS:other.test");
  try {
    ServerContext server(listener({{p.cert, other.key}}));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(other.key), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::tls
