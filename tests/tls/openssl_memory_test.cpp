#include "sluice/tls/openssl_memory.hpp"

#include "sluice/core/block_cache.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "test_certs.hpp"

namespace sluice::tls {
namespace {

namespace mem = block_cache;

// A client and a server over a memory BIO pair, with the record-buffer mode every sluice
// context has (tls/context.cpp): after a handshake and a few exchanges, each further request
// (40 bytes up) and answer (1 KiB down) takes its record buffers from the cache, not the heap.
// Returns the process's exit code: 0 when that holds.
int steady_tls_exchanges_stay_off_the_heap() {
  if (!install_openssl_memory()) return 2;
  sluice::testing::TestCerts certs;
  const auto leaf = certs.leaf("server", "DNS:server.test");
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  for (SSL_CTX* ctx : {server_ctx, client_ctx})
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(server_ctx, leaf.cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(server_ctx, leaf.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return 3;
  SSL* server = SSL_new(server_ctx);
  SSL* client = SSL_new(client_ctx);
  BIO* server_side = nullptr;
  BIO* client_side = nullptr;
  BIO_new_bio_pair(&server_side, 0, &client_side, 0);
  SSL_set_bio(server, server_side, server_side);
  SSL_set_bio(client, client_side, client_side);
  SSL_set_accept_state(server);
  SSL_set_connect_state(client);
  for (int i = 0; i < 20 && !(SSL_is_init_finished(server) && SSL_is_init_finished(client)); ++i) {
    SSL_do_handshake(client);
    SSL_do_handshake(server);
  }
  if (!SSL_is_init_finished(server) || !SSL_is_init_finished(client)) return 4;
  const std::string request(40, 'q');
  const std::string answer(1024, 'a');
  std::string got(2048, '\0');
  auto exchange = [&] {
    if (SSL_write(client, request.data(), static_cast<int>(request.size())) != static_cast<int>(request.size()))
      return false;
    if (SSL_read(server, got.data(), static_cast<int>(got.size())) != static_cast<int>(request.size())) return false;
    if (SSL_write(server, answer.data(), static_cast<int>(answer.size())) != static_cast<int>(answer.size()))
      return false;
    std::size_t read = 0;  // the client's first read also takes the server's session tickets
    while (read < answer.size()) {
      const int n = SSL_read(client, got.data(), static_cast<int>(got.size()));
      if (n <= 0) return false;
      read += static_cast<std::size_t>(n);
    }
    return read == answer.size();
  };
  for (int i = 0; i < 5; ++i)
    if (!exchange()) return 5;
  const auto before = mem::this_thread();
  for (int i = 0; i < 100; ++i)
    if (!exchange()) return 5;
  const auto after = mem::this_thread();
  if (after.taken_from_heap != before.taken_from_heap) return 6;     // a heap allocation per exchange
  if (after.taken_from_cache - before.taken_from_cache < 100) return 7;  // the buffers came and went
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  SSL_CTX_free(server_ctx);
  return 0;
}

// OpenSSL takes the functions only before its first allocation: in a process of its own.
TEST(OpensslMemoryDeathTest, InstalledBeforeOpensslsFirstAllocationTlsExchangesStayOffTheHeap) {
  const auto style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: OpenSSL untouched in it
  EXPECT_EXIT(std::_Exit(steady_tls_exchanges_stay_off_the_heap()), ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
  // Once OpenSSL allocated (this process has), it keeps malloc.
  SSL_CTX_free(SSL_CTX_new(TLS_server_method()));
  EXPECT_FALSE(install_openssl_memory());
}

}  // namespace
}  // namespace sluice::tls
