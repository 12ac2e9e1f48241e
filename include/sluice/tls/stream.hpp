#pragma once
// A TCP connection with or without TLS on it: the one stream type of the data path, for client
// connections (plain or TLS listeners) and upstream connections (plain or `tls = true`) alike.
//
// Why one type with a run-time branch instead of a session templated on its stream: the branch is
// one well-predicted test per I/O operation, next to a system call; the session, the connection
// pool and the tunnel code stay one (non-template) implementation each, and a plain connection
// pays nothing else (no allocation, the same socket calls). TLS state (OpenSSL's SSL object and
// Asio's engine buffers) is allocated once per TLS connection, never per request.
//
// Owned by one session or the pool of one worker; like every Asio object, not thread-safe. Reads
// and writes may overlap (one of each at a time) on the worker's thread.
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "sluice/tls/edge_io.hpp"

namespace sluice::tls {

class Stream {
public:
  using socket_type = boost::asio::ip::tcp::socket;
  using tls_type = boost::asio::ssl::stream<socket_type>;
  using executor_type = socket_type::executor_type;

  explicit Stream(socket_type socket) : socket_(std::move(socket)) {}
  explicit Stream(const executor_type& executor) : socket_(executor) {}
  template <class ExecutionContext>
    requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>
  explicit Stream(ExecutionContext& context) : socket_(context) {}

  Stream(Stream&&) noexcept = default;
  Stream& operator=(Stream&&) noexcept = default;

  // Puts TLS on the (connected, not yet used) socket: the handshake comes next.
  void start_tls(boost::asio::ssl::context& context) {
    tls_ = std::make_unique<tls_type>(std::move(socket_), context);
  }

  bool is_tls() const noexcept { return tls_ != nullptr; }
  tls_type* tls() noexcept { return tls_.get(); }
  socket_type& socket() noexcept { return tls_ ? tls_->next_layer() : socket_; }
  const socket_type& socket() const noexcept { return tls_ ? tls_->next_layer() : socket_; }
  executor_type get_executor() noexcept { return socket().get_executor(); }

  // AsyncReadStream / AsyncWriteStream, so that Asio's and Beast's algorithms work on it. When
  // both streams' initiating functions return the same type for `token` (a completion handler:
  // void; as_tuple(use_awaitable): the same awaitable), the call goes straight to the one in use,
  // so that a plain read costs what a socket read costs; other tokens go through async_initiate.
  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    if constexpr (same_result<Token, void(boost::system::error_code, std::size_t)>) {
      if (tls_) return tls_->async_read_some(buffers, std::forward<Token>(token));
      return socket_.async_read_some(buffers, std::forward<Token>(token));
    } else {
      return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
          [this](auto handler, const MutableBuffers& b) {
            if (tls_) tls_->async_read_some(b, std::move(handler));
            else socket_.async_read_some(b, std::move(handler));
          },
          token, buffers);
    }
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    if constexpr (same_result<Token, void(boost::system::error_code, std::size_t)>) {
      if (tls_) return tls_->async_write_some(buffers, std::forward<Token>(token));
      return socket_.async_write_some(buffers, std::forward<Token>(token));
    } else {
      return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
          [this](auto handler, const ConstBuffers& b) {
            if (tls_) tls_->async_write_some(b, std::move(handler));
            else socket_.async_write_some(b, std::move(handler));
          },
          token, buffers);
    }
  }

  // A read that does not wait: the bytes the kernel has now (at most the buffer's size), or 0
  // - when it has none: proved so before (no edge since, and no system call now), or told now
  //   (EAGAIN, which is such a proof: the next readiness wait is not tried, see edge_io.hpp);
  // - with TLS (not tried: the engine may hold bytes the kernel does not);
  // - at end of stream or on an error (left for the read that follows to report).
  // A short read proves the socket drained too once watch_hangup() registered it for hang-ups.
  std::size_t try_read_some(boost::asio::mutable_buffer buffer) noexcept {
    if (tls_ || !edge::will_try(socket_)) return 0;
    const auto n = edge::sys_recv(socket_.native_handle(), buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) {
      if (static_cast<std::size_t>(n) < buffer.size()) edge::short_read(socket_);
      return static_cast<std::size_t>(n);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) edge::drained(socket_);
    return 0;
  }

  // A write that does not wait: as much of `buffers` as the kernel takes now (one sendmsg,
  // MSG_DONTWAIT | MSG_NOSIGNAL, at most `max_iov` buffers), or 0 with TLS, with more buffers,
  // when it takes nothing (EAGAIN) or on an error (left for the write that follows to report).
  // A whole answer usually goes at once: no reactor operation and no suspension, where Asio's
  // async_write would make the same system call and then post its completion.
  template <class ConstBuffers>
  std::size_t try_write(const ConstBuffers& buffers) noexcept {
    if (tls_) return 0;
    constexpr std::size_t max_iov = 8;
    iovec iov[max_iov];
    std::size_t count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      if (count == max_iov) return 0;
      iov[count++] = iovec{const_cast<void*>(b.data()), b.size()};
    }
    if (count == 0) return 0;
    // One buffer: send(), which costs the kernel less than sendmsg() (no msghdr or iovec array
    // to copy in: 1.5 against 1.8 us per 126-byte write on loopback, 2.0 with two buffers).
    constexpr int flags = MSG_DONTWAIT | MSG_NOSIGNAL;
    ssize_t n = 0;
    if (count == 1) {
      n = edge::sys_send(socket_.native_handle(), iov[0].iov_base, iov[0].iov_len, flags);
    } else {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      n = edge::sys_sendmsg(socket_.native_handle(), &msg, flags);
    }
    return n > 0 ? static_cast<std::size_t>(n) : 0;
  }

  // How many more bytes the connection's socket may hold unsent before it holds `limit`
  // (SIOCOUTQNSD: written, not yet sent), 0 when it holds that many already; when the kernel does
  // not say, no bound (the largest size_t). With TLS these are the records' bytes: a completed
  // write has handed all of them to the socket.
  std::size_t unsent_room(std::size_t limit) noexcept {
    int unsent = 0;
    if (::ioctl(socket().native_handle(), SIOCOUTQNSD, &unsent) != 0 || unsent < 0)
      return std::numeric_limits<std::size_t>::max();
    return static_cast<std::size_t>(unsent) >= limit ? 0 : limit - static_cast<std::size_t>(unsent);
  }

  // Whether try_write() can take any byte: a plain connection. With TLS it takes none (the
  // engine writes asynchronously), so a caller need not prepare a write for it.
  bool writes_at_once() const noexcept { return !tls_; }

  // A plain connection expected to serve more than one exchange (a keep-alive client, a pooled
  // origin connection): registers it for hang-ups (EPOLLRDHUP; one epoll_ctl, the first time),
  // after which its short reads prove it drained and a next read needs no system call that
  // finds nothing (edge_io.hpp). Nothing with TLS.
  void watch_hangup() noexcept {
    if (!tls_) edge::watch_hangup(socket_);
  }
  // Whether try_read_some() would ask the kernel (plain, and not proved drained since the last
  // edge): when not, a read buffer is not worth taking for it.
  bool worth_a_try() noexcept { return !tls_ && edge::will_try(socket_); }
  // Whether the kernel is known to have nothing for this plain connection: no byte, no FIN and
  // no error since a proof (EAGAIN, or a short read while watched). False with TLS.
  bool known_drained() noexcept { return !tls_ && edge::hangup_watched(socket_) && !edge::will_try(socket_); }

  // Waits until a read would not block. On a plain socket: for the kernel to have bytes (which
  // lets an idle connection hold no read buffer), with edge_io.hpp's wait (no epoll_ctl; no try
  // on a socket proved drained). With TLS, decrypted bytes may already sit in the TLS engine
  // where the kernel cannot see them, so this completes at once and the read that follows does
  // the waiting.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto handler) {
          if (tls_) {
            boost::asio::post(socket().get_executor(),
                              [h = std::move(handler)]() mutable { std::move(h)(boost::system::error_code{}); });
          } else {
            edge::async_wait_readable(socket_, std::move(handler));
          }
        },
        token);
  }

  // The same wait in an asio::awaitable coroutine, with no coroutine of its own
  // (edge::readable()): `co_await stream.readable(ec)`.
  auto readable(boost::system::error_code& ec) {
    return [this, &ec](edge::AwaitingFrame* frame) -> edge::AwaitingThread* {
      edge::Resume handler(frame, ec);
      if (tls_) {
        boost::asio::post(socket().get_executor(), [h = std::move(handler)]() mutable { h({}); });
      } else {
        edge::InitiateWait<socket_type>{&socket_}(std::move(handler));
      }
      return nullptr;
    };
  }

  template <class Token>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type type, Token&& token) {
    return tls_->async_handshake(type, std::forward<Token>(token));
  }

  // Sends close_notify and waits for the peer's (or for the connection to fail).
  template <class Token>
  auto async_tls_shutdown(Token&& token) {
    return tls_->async_shutdown(std::forward<Token>(token));
  }

  // These act on the TCP socket underneath: cancelling or closing it ends any TLS operation too.
  void cancel(boost::system::error_code& ec) { socket().cancel(ec); }
  void close(boost::system::error_code& ec) { socket().close(ec); }
  void shutdown(socket_type::shutdown_type what, boost::system::error_code& ec) {
    socket().shutdown(what, ec);
  }
  bool is_open() const noexcept { return socket().is_open(); }

private:
  // True when every initiating function with this signature returns one type for Token: then
  // both branches of a dispatch can return it directly.
  template <class Token, class Signature>
  static constexpr bool same_result =
      std::is_void_v<typename boost::asio::async_result<std::decay_t<Token>, Signature>::return_type> ||
      std::is_same_v<std::decay_t<Token>,
                     boost::asio::as_tuple_t<boost::asio::use_awaitable_t<>>>;

  socket_type socket_;              // the connection, while there is no TLS on it
  std::unique_ptr<tls_type> tls_;  // owns the connection once TLS is on
};

}  // namespace sluice::tls
