#pragma once
// OpenSSL's heap memory through the per-thread block cache (core/block_cache.hpp).
//
// Every TLS connection runs with SSL_MODE_RELEASE_BUFFERS (context.cpp): a connection between
// records holds no record buffer (~17 KiB to read, as much to write), so an idle TLS connection
// costs what a plain one does. The price was paid per request: each read and each write took its
// buffer from the heap anew, 7 allocations per TLS keep-alive request
// (bench/allocs_per_request.py). install_openssl_memory() gives OpenSSL the cache's functions
// (CRYPTO_set_mem_functions): a worker in steady state then takes nothing from the heap for TLS,
// and an idle connection still holds no buffer.

namespace sluice::tls {

// Called first thing in main(), before OpenSSL allocated anything; false when it is too late
// (then OpenSSL keeps using malloc, as before).
bool install_openssl_memory() noexcept;

}  // namespace sluice::tls
