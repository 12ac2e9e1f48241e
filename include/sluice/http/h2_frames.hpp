#pragma once
// What every part of sluice that speaks HTTP/2 through nghttp2 shares: sessions made on the
// thread's memory (core/block_cache.hpp) with one outbound frame buffer per thread, frames
// gathered for a write, fields for nghttp2, and RFC 9113's connection-specific fields. The
// client connections (proxy/h2_session.hpp), the connections to servers (proxy/h2_upstream.hpp)
// and the gRPC health probe (health/grpc_probe.hpp) use them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nghttp2/nghttp2.h>

namespace sluice::http {

// A field for nghttp2, pointing at `name` and `value` (which nghttp2 copies when it is submitted).
inline nghttp2_nv h2_field(std::string_view name, std::string_view value) noexcept {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

// Which end of a connection an nghttp2 session is.
enum class H2Side : std::uint8_t { client, server };

// A session with `callbacks` (taken over and freed) and `self` as user data, whose windows open
// only as its owner hands the bytes on (nghttp2_session_consume): nghttp2's automatic
// WINDOW_UPDATEs are off on both sides, so a peer can have no more in sluice than its windows.
// Its memory comes from the thread's block cache (core/block_cache.hpp), and its outbound frame
// buffer is the one all sessions made on this thread share: only gather_h2_frames() may drive
// nghttp2_session_mem_send() on it.
nghttp2_session* new_h2_session(H2Side side, nghttp2_session_callbacks* callbacks, void* self);
// How many sessions made on this thread share its frame buffer now (for tests).
std::size_t h2_sessions_sharing_framebuf() noexcept;

// The frames nghttp2 has ready, appended to `out` until it holds `gather` bytes or more (one
// write's worth). Each frame is copied out before nghttp2 is asked for the next, which is what
// lets sessions share their frame buffer (new_h2_session()).
void gather_h2_frames(nghttp2_session* session, std::string& out, std::size_t gather);

// HTTP/2 field names are lowercase (RFC 9113 §8.2.1); an HTTP/1.1 head's are not.
inline char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// RFC 9113 §8.2.2: the fields that are HTTP/1.1's connection's alone, never sent in HTTP/2.
bool connection_specific_field(std::string_view name) noexcept;

}  // namespace sluice::http
