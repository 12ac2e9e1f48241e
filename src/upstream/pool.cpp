#include "sluice/upstream/pool.hpp"

#include <algorithm>

#include "sluice/endpoint/endpoint.hpp"

namespace sluice {

bool ConnectionPool::is_alive(stream_type& stream, Clock::duration idle_for) noexcept {
  // An idle HTTP/1.1 connection has nothing to say: a readable byte is either EOF (the origin
  // closed it) or unsolicited data that would desynchronise the next exchange. Either way it is
  // not reusable. With TLS the same holds for records: an idle peer that sends one is closing
  // (close_notify) or out of step, so the raw socket is asked.
  auto& socket = stream.socket();
  // Proved drained by the last read of the answer (a short read on a watched connection, see
  // tls/edge_io.hpp), and no edge since: nothing came, not even a FIN. No system call.
  if (idle_for < proof_lifetime && stream.known_drained()) return true;
  if (!tls::edge::nothing_to_read(socket.native_handle())) return false;
  // Nothing came in, not even a FIN: whatever comes next raises a new edge, so the read of the
  // answer to the request about to be written is queued without a try (tls/edge_io.hpp).
  tls::edge::drained(socket);
  return true;
}

std::optional<ConnectionPool::stream_type> ConnectionPool::acquire(const Endpoint& endpoint) {
  tls::StreamSlot slot;
  acquire(endpoint, slot);
  if (!slot) return std::nullopt;
  return std::optional<stream_type>(std::move(*slot));
}

void ConnectionPool::acquire(const Endpoint& endpoint, tls::StreamSlot& into) {
  if (endpoint.id() >= idle_.size()) idle_.resize(endpoint.id() + 1);
  auto& pooled = idle_[endpoint.id()];
  auto& stack = pooled.idle;
  const auto now = clock_.now();
  while (!stack.empty()) {
    auto& idle = stack.back();
    if (idle.expires > now && is_alive(*idle.stream, now - idle.released)) {
      into = std::move(idle.stream);
      stack.pop_back();
      return;
    }
    stack.pop_back();  // closes it
  }
  ++pooled.misses;
}

void ConnectionPool::release_stream(const Endpoint& endpoint, stream_type&& stream, std::uint32_t max_idle,
                                    Clock::duration keepalive_timeout) {
  tls::StreamSlot slot;
  slot.emplace(std::move(stream));
  release(endpoint, std::move(slot), max_idle, keepalive_timeout);
}

void ConnectionPool::release(const Endpoint& endpoint, tls::StreamSlot&& stream, std::uint32_t max_idle,
                             Clock::duration keepalive_timeout) {
  // A draining server (drained, or gone from DNS or the file) gets no new request, so a
  // connection to it would only wait for its expiry.
  if (max_idle == 0 || endpoint.draining()) {
    boost::system::error_code ignored;
    stream->close(ignored);
    stream.reset();
    return;
  }
  if (endpoint.id() >= idle_.size()) idle_.resize(endpoint.id() + 1);
  auto& [stack, keep, misses, recent] = idle_[endpoint.id()];
  keep = max_idle;
  // Full, surplus included: drop the oldest, keep the freshest.
  const std::size_t bound = std::max({std::size_t{max_idle} * surplus_factor, std::size_t{misses}, std::size_t{recent}});
  if (stack.size() >= bound) stack.erase(stack.begin());  // closes it
  // Its next answer's short read may then prove it drained: the checkout after that needs no peek.
  stream->watch_hangup();
  const auto now = clock_.now();
  stack.push_back(Idle{std::move(stream), now, now + keepalive_timeout});
}

void ConnectionPool::sweep() {
  const auto now = clock_.now();
  for (auto& [stack, keep, misses, recent] : idle_) {
    recent = std::exchange(misses, 0);
    // Ordered by release time, so expired connections, and the surplus idle for surplus_linger,
    // form a prefix.
    const std::size_t surplus = stack.size() > keep ? stack.size() - keep : 0;
    std::size_t end = 0;
    while (end < stack.size() &&
           (stack[end].expires <= now || (end < surplus && stack[end].released + surplus_linger <= now)))
      ++end;
    stack.erase(stack.begin(), stack.begin() + static_cast<std::ptrdiff_t>(end));  // closes them
  }
}

void ConnectionPool::close(const Endpoint& endpoint) {
  if (endpoint.id() < idle_.size()) idle_[endpoint.id()].idle.clear();
}

void ConnectionPool::close_all() {
  for (auto& stack : idle_) stack.idle.clear();
}

std::size_t ConnectionPool::idle_count() const noexcept {
  std::size_t n = 0;
  for (const auto& stack : idle_) n += stack.idle.size();
  return n;
}

std::vector<std::uint32_t> ConnectionPool::idle_by_endpoint() const {
  std::vector<std::uint32_t> counts(idle_.size());
  for (std::size_t id = 0; id < idle_.size(); ++id) counts[id] = static_cast<std::uint32_t>(idle_[id].idle.size());
  return counts;
}

}  // namespace sluice
