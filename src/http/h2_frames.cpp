#include "sluice/http/h2_frames.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <boost/beast/core/string.hpp>

#include "sluice/core/block_cache.hpp"

namespace sluice::http {

namespace {

// nghttp2's memory (nghttp2_mem, one per thread that makes sessions; its mem_user_data). Every
// block comes from the thread's block cache, except one: the first chunk of a session's outbound
// frame buffer (nghttp2's aob.framebuf, NGHTTP2_FRAMEBUF_CHUNKLEN bytes, taken when the session
// is made and kept until it is deleted), which is the thread's shared chunk. nghttp2 writes into
// it only inside nghttp2_session_mem_send(), and gather_h2_frames() copies out each frame it
// returns before any other session runs, so no session's bytes wait there for another's turn:
// an idle connection holds no 16 KiB frame buffer of its own. (A HEADERS block longer than one
// chunk goes on in chunks nghttp2 takes later, each the session's own.) The object lives as long
// as the process: a session made on this thread may be deleted on another, or late.
struct H2Memory {
  static constexpr std::size_t framebuf_chunk = 9 + 1 + 16384;  // frame header, padding length, payload
  nghttp2_mem mem{this, &malloc_fn, &free_fn, &calloc_fn, &realloc_fn};
  std::unique_ptr<char[]> framebuf{new char[framebuf_chunk]};
  bool making = false;  // a session is being made: its first chunk of that size is the frame buffer
  std::size_t sharing = 0;

  static H2Memory& local() {
    thread_local H2Memory* mine = nullptr;
    if (mine == nullptr) {
      static std::mutex lock;
      static std::vector<std::unique_ptr<H2Memory>> all;
      const std::lock_guard hold(lock);
      mine = all.emplace_back(std::make_unique<H2Memory>()).get();
    }
    return *mine;
  }
  static H2Memory& of(void* user) noexcept { return *static_cast<H2Memory*>(user); }

  static void* malloc_fn(std::size_t n, void* user) { return realloc_fn(nullptr, n, user); }
  static void* calloc_fn(std::size_t n, std::size_t size, void*) {
    return block_cache::allocate_zeroed(n == 0 ? 1 : n, size == 0 ? 1 : size);
  }
  static void* realloc_fn(void* p, std::size_t n, void* user) {
    auto& self = of(user);
    if (p == nullptr && n == framebuf_chunk && std::exchange(self.making, false)) {
      ++self.sharing;
      return self.framebuf.get();
    }
    if (p != nullptr && p == self.framebuf.get()) {  // nghttp2 never grows it; if it did: a copy of its own
      void* q = block_cache::allocate(std::max(n, framebuf_chunk));
      if (q == nullptr) return nullptr;
      std::memcpy(q, p, framebuf_chunk);
      --self.sharing;
      return q;
    }
    return block_cache::reallocate(p, n == 0 ? 1 : n);  // nghttp2 takes nullptr as out of memory
  }
  static void free_fn(void* p, void* user) {
    auto& self = of(user);
    if (p != nullptr && p == self.framebuf.get()) {
      --self.sharing;
      return;
    }
    block_cache::release(p);
  }
};

}  // namespace

nghttp2_session* new_h2_session(H2Side side, nghttp2_session_callbacks* callbacks, void* self) {
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_session* session = nullptr;
  auto& memory = H2Memory::local();
  memory.making = true;
  if (side == H2Side::client) nghttp2_session_client_new3(&session, callbacks, self, opt, &memory.mem);
  else nghttp2_session_server_new3(&session, callbacks, self, opt, &memory.mem);
  memory.making = false;
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(callbacks);
  return session;
}

std::size_t h2_sessions_sharing_framebuf() noexcept { return H2Memory::local().sharing; }

void gather_h2_frames(nghttp2_session* session, std::string& out, std::size_t gather) {
  while (out.size() < gather) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session, &data);
    if (n <= 0) return;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool connection_specific_field(std::string_view name) noexcept {
  using boost::beast::iequals;
  return iequals(name, "connection") || iequals(name, "keep-alive") || iequals(name, "proxy-connection") ||
         iequals(name, "transfer-encoding") || iequals(name, "upgrade");
}

}  // namespace sluice::http
