#pragma once
// StreamSlot: an upstream connection's place, a tls::Stream on the heap. A connection moves
// between the worker's pool and the request using it at every request; moving the slot moves a
// pointer, where moving the stream moved a socket (its type-erased executor copied, its reactor
// state handed over) and destroyed the one moved from: ~300 instructions per request for the
// checkout and the release (bench/callgrind.sh). The stream is allocated once per
// connection, when it is opened. The subset of std::optional's interface that attempt_server()
// (proxy/upstream_attempt.hpp) and the session use.
#include <memory>
#include <utility>

#include "sluice/tls/stream.hpp"

namespace sluice::tls {

class StreamSlot {
public:
  using value_type = Stream;

  StreamSlot() = default;
  StreamSlot(StreamSlot&&) noexcept = default;
  StreamSlot& operator=(StreamSlot&&) noexcept = default;

  bool has_value() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return has_value(); }
  Stream& operator*() const noexcept { return *p_; }
  Stream* operator->() const noexcept { return p_.get(); }

  template <class... Args>
  Stream& emplace(Args&&... args) {
    p_ = std::make_unique<Stream>(std::forward<Args>(args)...);
    return *p_;
  }
  // Closes the connection (the stream's destructor), if there is one.
  void reset() noexcept { p_.reset(); }

private:
  std::unique_ptr<Stream> p_;
};

}  // namespace sluice::tls
