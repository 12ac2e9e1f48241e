#include "sluice/tls/openssl_memory.hpp"

#include <cstddef>

#include <openssl/crypto.h>

#include "sluice/core/block_cache.hpp"

namespace sluice::tls {
namespace {

void* malloc_fn(std::size_t n, const char*, int) { return block_cache::allocate(n); }
void* realloc_fn(void* p, std::size_t n, const char*, int) { return block_cache::reallocate(p, n); }
void free_fn(void* p, const char*, int) { block_cache::release(p); }

}  // namespace

bool install_openssl_memory() noexcept { return CRYPTO_set_mem_functions(&malloc_fn, &realloc_fn, &free_fn) == 1; }

}  // namespace sluice::tls
