#pragma once
// Memory a pool keeps for reuse is poisoned under AddressSanitizer, so that a block used after it
// went back to its pool is still reported (core/frame_pool.hpp, core/block_cache.hpp); elsewhere
// the marks cost nothing.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SLUICE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SLUICE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SLUICE_POISON(p, n) ((void)(p), (void)(n))
#define SLUICE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
