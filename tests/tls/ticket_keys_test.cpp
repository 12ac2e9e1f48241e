// Session ticket keys from a file: the format's checks, and tickets sealed with one key resumed
// by a listener whose file holds it (first to encrypt, or later to decrypt and renew).
#include "sluice/tls/ticket_keys.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <gtest/gtest.h>

#include "sluice/tls/context.hpp"
#include "test_certs.hpp"

namespace sluice::tls {
namespace {

using testing::TestCerts;

std::string key_bytes(char fill) { return std::string(ticket_key_bytes, fill); }

TEST(TicketKeys, ReadsEightyByteKeysInOrder) {
  TestCerts certs;
  const auto path = certs.file("two.key", key_bytes('b') + key_bytes('a'));
  TicketKeys keys;
  ASSERT_FALSE(keys.read(path));
  ASSERT_EQ(keys.current()->keys.size(), 2u);
  EXPECT_EQ(keys.current()->keys[0].name[0], 'b');
  EXPECT_EQ(keys.current()->keys[1].aes[31], 'a');
}

TEST(TicketKeys, RefusesAMissingEmptyOrWronglySizedFile) {
  TestCerts certs;
  const auto missing = certs.dir() + "/missing.key";
  EXPECT_EQ(check_ticket_key_file(missing), "cannot read '" + missing + "': No such file or directory");
  for (const std::size_t size : {0, 48, 79, 81, 159}) {
    const auto path = certs.file("bad.key", std::string(size, 'x'));
    EXPECT_EQ(check_ticket_key_file(path), "'" + path + "': must hold one or more 80-byte keys (openssl rand 80), got " +
                                               std::to_string(size) + " bytes");
  }
  EXPECT_FALSE(check_ticket_key_file(certs.file("ok.key", key_bytes('k'))));
}

// A client and a listener shaking hands in memory; the session the client ends with (with the
// ticket the server sent), and whether the offered one was resumed.
struct Resumption {
  SSL_SESSION* session = nullptr;  // owned by the caller
  bool reused = false;
};

void pump(SSL* client, SSL* server) {
  for (int i = 0; i < 100 && (!SSL_is_init_finished(client) || !SSL_is_init_finished(server)); ++i) {
    SSL_do_handshake(client);
    SSL_do_handshake(server);
  }
}

Resumption connect(ServerContext& listener, SSL_SESSION* offered, int version) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> client_ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  SSL_CTX_set_min_proto_version(client_ctx.get(), version);
  SSL_CTX_set_max_proto_version(client_ctx.get(), version);
  SSL* client = SSL_new(client_ctx.get());
  SSL* server = SSL_new(listener.context().native_handle());
  BIO *client_bio = nullptr, *server_bio = nullptr;
  BIO_new_bio_pair(&client_bio, 0, &server_bio, 0);
  SSL_set_bio(client, client_bio, client_bio);
  SSL_set_bio(server, server_bio, server_bio);
  SSL_set_tlsext_host_name(client, "srv.test");
  if (offered != nullptr) SSL_set_session(client, offered);
  SSL_set_connect_state(client);
  SSL_set_accept_state(server);
  pump(client, server);
  EXPECT_TRUE(SSL_is_init_finished(client) && SSL_is_init_finished(server));
  char byte = 0;
  SSL_read(client, &byte, 1);  // TLS 1.3: takes in the tickets sent after the handshake
  ERR_clear_error();
  Resumption out{SSL_get1_session(client), SSL_session_reused(client) == 1};
  // A connection freed without a shutdown marks its session not resumable: end both cleanly.
  for (SSL* ssl : {client, server}) {
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
  }
  return out;
}

struct Listeners {
  TestCerts certs;
  TestCerts::Pair leaf = certs.leaf("srv", "DNS:srv.test");
  std::string key1 = certs.file("1.key", key_bytes('1'));
  std::string key2 = certs.file("2.key", key_bytes('2'));
  std::string rotated = certs.file("2-1.key", key_bytes('2') + key_bytes('1'));

  std::unique_ptr<ServerContext> make(const std::string& key_file) {
    ServerSettings s;
    s.certificates.push_back({leaf.cert, leaf.key});
    s.session_ticket_key_file = key_file;
    return std::make_unique<ServerContext>(s);
  }
};

// Each listener is a new context: no session cache entry is shared, only the ticket keys.
TEST(TicketKeys, ATicketResumesOnEveryListenerHoldingItsKeyAndIsRenewedWithTheFirst) {
  Listeners l;
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    SCOPED_TRACE(version);
    auto first = connect(*l.make(l.key1), nullptr, version);
    ASSERT_NE(first.session, nullptr);
    EXPECT_FALSE(first.reused);
    ASSERT_TRUE(SSL_SESSION_has_ticket(first.session));

    const auto again = connect(*l.make(l.key1), first.session, version);  // a reload, another process
    EXPECT_TRUE(again.reused);
    // Rotated: key 2 encrypts, key 1 still decrypts, and the ticket is renewed under key 2.
    const auto rotated = connect(*l.make(l.rotated), first.session, version);
    EXPECT_TRUE(rotated.reused);
    const auto renewed = connect(*l.make(l.key2), rotated.session, version);
    EXPECT_TRUE(renewed.reused);
    // Key 1 gone: a full handshake.
    const auto dropped = connect(*l.make(l.key2), first.session, version);
    EXPECT_FALSE(dropped.reused);
    // Without a key file each context has its own random keys.
    const auto own = connect(*l.make(""), first.session, version);
    EXPECT_FALSE(own.reused);
    for (auto* s : {first.session, again.session, rotated.session, renewed.session, dropped.session, own.session})
      SSL_SESSION_free(s);
  }
}

// The fleet's keys: one TicketKeys given to the listener and replaced while it serves, as each
// rotation does. A ticket resumes while its key is in the set, encrypting or not.
TEST(TicketKeys, KeysReplacedUnderALiveListenerTakeEffectAtTheNextHandshake) {
  Listeners l;
  const auto k1 = TicketKey::random(), k2 = TicketKey::random(), k3 = TicketKey::random();
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    SCOPED_TRACE(version);
    auto shared = std::make_shared<TicketKeys>();
    shared->set({k1, k2});
    ServerSettings s;
    s.certificates.push_back({l.leaf.cert, l.leaf.key});
    s.shared_ticket_keys = shared;
    ServerContext listener(s);
    auto first = connect(listener, nullptr, version);
    ASSERT_TRUE(SSL_SESSION_has_ticket(first.session));
    shared->set({k2, k1});  // rotated: k2 encrypts, k1 still decrypts
    const auto after_one = connect(listener, first.session, version);
    EXPECT_TRUE(after_one.reused);
    shared->set({k3, k2});  // k1 dropped
    const auto after_two = connect(listener, first.session, version);
    EXPECT_FALSE(after_two.reused);
    // A key file wins over the shared keys.
    s.session_ticket_key_file = l.key1;
    ServerContext from_file(s);
    const auto filed = connect(from_file, nullptr, version);
    const auto again = connect(*l.make(l.key1), filed.session, version);
    EXPECT_TRUE(again.reused);
    for (auto* x : {first.session, after_one.session, after_two.session, filed.session, again.session})
      SSL_SESSION_free(x);
  }
}

}  // namespace
}  // namespace sluice::tls
