#include "sluice/tls/openssl_memory.hpp"

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

namespace mem = openssl_memory;

TEST(OpensslMemory, ClassesArePowersOfTwoAndOneAndAHalfTimesThem) {
  EXPECT_EQ(mem::capacity_for(1), 16u);
  EXPECT_EQ(mem::capacity_for(16), 16u);
  EXPECT_EQ(mem::capacity_for(17), 24u);
  EXPECT_EQ(mem::capacity_for(25), 32u);
  EXPECT_EQ(mem::capacity_for(33), 48u);
  EXPECT_EQ(mem::capacity_for(4096), 4096u);
  EXPECT_EQ(mem::capacity_for(16709), 24576u);  // a TLS record buffer
  EXPECT_EQ(mem::capacity_for(mem::largest_cached), mem::largest_cached);
  EXPECT_EQ(mem::capacity_for(mem::largest_cached + 1), mem::largest_cached + 1);
}

TEST(OpensslMemory, AFreedBlockServesTheNextAllocationOfItsClass) {
  auto* p = static_cast<char*>(mem::allocate(17000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
  std::memset(p, 'x', 17000);
  const auto before = mem::this_thread();
  mem::release(p);
  EXPECT_EQ(mem::this_thread().cached_blocks, before.cached_blocks + 1);
  EXPECT_EQ(mem::this_thread().cached_bytes, before.cached_bytes + 24576);
  void* q = mem::allocate(20000);  // the same class
  EXPECT_EQ(q, p);
  EXPECT_EQ(mem::this_thread().taken_from_cache, before.taken_from_cache + 1);
  EXPECT_EQ(mem::this_thread().cached_blocks, before.cached_blocks);
  void* other = mem::allocate(30000);  // another class: from the heap
  EXPECT_NE(other, p);
  mem::release(q);
  mem::release(other);
}

TEST(OpensslMemory, OpensslSemanticsForZeroAndNull) {
  EXPECT_EQ(mem::allocate(0), nullptr);
  mem::release(nullptr);
  void* p = mem::reallocate(nullptr, 40);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mem::reallocate(p, 0), nullptr);  // released
}

TEST(OpensslMemory, ReallocateKeepsTheBytes) {
  auto* p = static_cast<char*>(mem::allocate(20));
  std::memcpy(p, "0123456789abcdefghi", 20);
  EXPECT_EQ(mem::reallocate(p, 24), p);  // within its class's capacity
  auto* grown = static_cast<char*>(mem::reallocate(p, 5000));
  ASSERT_NE(grown, nullptr);
  EXPECT_STREQ(grown, "0123456789abcdefghi");
  auto* large = static_cast<char*>(mem::reallocate(grown, mem::largest_cached + 100));
  ASSERT_NE(large, nullptr);
  EXPECT_STREQ(large, "0123456789abcdefghi");
  auto* larger = static_cast<char*>(mem::reallocate(large, 4 * mem::largest_cached));
  ASSERT_NE(larger, nullptr);
  EXPECT_STREQ(larger, "0123456789abcdefghi");
  mem::release(larger);  // uncached: back to the heap
}

TEST(OpensslMemory, TheCacheIsBounded) {
  const auto before = mem::this_thread();
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(mem::allocate(mem::largest_cached));
  for (void* b : blocks) mem::release(b);
  const auto after = mem::this_thread();
  EXPECT_LE(after.cached_blocks - before.cached_blocks, 4u);  // 4 of the largest class at most
  std::vector<void*> small;
  for (int i = 0; i < 10000; ++i) small.push_back(mem::allocate(16));
  for (void* b : small) mem::release(b);
  EXPECT_LE(mem::this_thread().cached_bytes, before.cached_bytes + 4 * mem::largest_cached + 64 * 1024);
  // However many classes are freed into, the thread holds at most cache_limit_bytes.
  std::vector<void*> all;
  for (std::size_t size = 16; size <= mem::largest_cached; size += size / 2)
    for (int i = 0; i < 64; ++i) all.push_back(mem::allocate(size));
  for (void* b : all) mem::release(b);
  EXPECT_LE(mem::this_thread().cached_bytes, mem::cache_limit_bytes);
}

TEST(OpensslMemory, ABlockFreedOnAnotherThreadIsCachedThereAndFreedWhenItEnds) {
  void* p = mem::allocate(3000);
  mem::Stats there;
  std::thread t([&] {
    mem::release(p);
    there = mem::this_thread();
  });
  t.join();  // its cache emptied as it ended (LeakSanitizer and valgrind check the rest)
  EXPECT_EQ(there.cached_blocks, 1u);
  EXPECT_EQ(there.cached_bytes, mem::capacity_for(3000));
}

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
