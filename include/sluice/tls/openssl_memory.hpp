#pragma once
// OpenSSL's heap memory through a per-thread cache of freed blocks.
//
// Every TLS connection runs with SSL_MODE_RELEASE_BUFFERS (context.cpp): a connection between
// records holds no record buffer (~17 KiB to read, as much to write), so an idle TLS connection
// costs what a plain one does. The price was paid per request: each read and each write took its
// buffer from the heap anew, 7 allocations per TLS keep-alive request
// (bench/allocs_per_request.py). install_openssl_memory() gives OpenSSL our allocation functions
// (CRYPTO_set_mem_functions): a block freed waits in the freeing thread's cache, by size class,
// for the next allocation of its class; a worker in steady state then takes nothing from the
// heap for TLS either, and an idle connection still holds no buffer. The cache is bounded (64 KiB
// of each small class, 4 blocks of each large one, cache_limit_bytes in all; beyond that a freed
// block goes back to the heap) and emptied when its thread ends.
//
// Each block carries a 16-byte header (its class and capacity): malloc's alignment is kept, and
// a block freed on another thread than the one that took it is simply cached there.
#include <cstddef>
#include <cstdint>

namespace sluice::tls {

// Called first thing in main(), before OpenSSL allocated anything; false when it is too late
// (then OpenSSL keeps using malloc, as before).
bool install_openssl_memory() noexcept;

namespace openssl_memory {

// The functions install_openssl_memory() hands to OpenSSL (exposed for tests): OpenSSL's
// semantics, so allocate(0) and reallocate(p, 0) give nullptr, reallocate(nullptr, n) allocates.
void* allocate(std::size_t n) noexcept;
void* reallocate(void* p, std::size_t n) noexcept;
void release(void* p) noexcept;

// Blocks of up to this size are cached, in classes a power of two or 1.5 times one apart.
inline constexpr std::size_t largest_cached = 64 * 1024;
// What one thread's cache holds at most.
inline constexpr std::size_t cache_limit_bytes = 1024 * 1024;

// The calling thread's cache.
struct Stats {
  std::uint64_t taken_from_cache = 0;  // allocations served by a cached block
  std::uint64_t taken_from_heap = 0;   // malloc and realloc calls made for OpenSSL
  std::size_t cached_bytes = 0;        // the blocks waiting now (capacity)
  std::size_t cached_blocks = 0;
};
Stats this_thread() noexcept;

// The capacity a request of n bytes gets (its class's size; n itself above largest_cached).
std::size_t capacity_for(std::size_t n) noexcept;

}  // namespace openssl_memory
}  // namespace sluice::tls
