#pragma once
// A readiness wait on a plain TCP socket that does not re-register what is registered already,
// and what lets it skip its try: a socket proved drained.
//
// Asio's epoll reactor registers each socket once, edge-triggered, for input and output (not for
// EPOLLRDHUP). Its async_wait re-registers the descriptor with epoll_ctl(EPOLL_CTL_MOD) every
// time; a read started before the peer has sent anything costs a recv() that returns EAGAIN. A
// proxied keep-alive request paid one of these on each side (waiting for the origin's answer,
// waiting for the client's next request): two of its seven system calls.
//
// The reactor keeps, per descriptor and direction, whether an edge has come since an operation
// said the socket was exhausted, and tries a new operation at once only then:
// - async_wait_readable (and readable(), its form for coroutines) is queued for the next edge
//   like a read (no epoll_ctl); tried at once, with a one-byte MSG_PEEK, only when the reactor
//   has seen an edge since the socket was last proved drained.
// - drained(socket) records that proof: a recv() or peek that just said EAGAIN saw no byte, no
//   FIN and no error, so whatever comes later raises a new edge. The pool proves it for every
//   connection it hands out (ConnectionPool::is_alive), so the answer is awaited without a try.
// - A read that returns fewer bytes than asked is such a proof only on a socket watched for
//   hang-ups (watch_hangup: EPOLLRDHUP registered, nginx's rule); otherwise a FIN that came with
//   or right after those bytes is reported only by the next read, and its edge may have been
//   consumed already.
//
// Built on Asio's reactor interface (boost/asio/detail, Boost 1.81): the reactor's start_op, the
// operation base class, the socket's implementation (which basic_socket keeps protected) and the
// reactor's per-descriptor flags, registered events, epoll descriptor and completion function
// (which it keeps private). The wait is Asio's wait operation with
// another perform function and no handler_work (see WaitOp); cancellation (cancel(), close(),
// per-operation cancellation slots) and handler allocation work as for Asio's. Only on the thread
// that runs the io_context, for handlers of that io_context.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/query.hpp>

#include "sluice/core/clock.hpp"

namespace sluice::tls::edge {

namespace asio_detail = boost::asio::detail;
using tcp_socket = boost::asio::ip::tcp::socket;
using Reactor = asio_detail::epoll_reactor;

static_assert(std::is_same_v<asio_detail::reactor, Reactor>,
              "edge_io.hpp is written against Asio's epoll reactor");

using tcp_acceptor = boost::asio::ip::tcp::acceptor;

// Private members, reached the one portable way: an explicit instantiation may name a private
// member, and the friend function it defines hands the pointer out.
template <class Tag, typename Tag::type M>
struct Expose {
  friend typename Tag::type member(Tag) noexcept { return M; }
};

// The implementation (descriptor, state flags, reactor registration) of a socket or an acceptor,
// both Asio's reactive_socket_service<tcp>'s. A class derived from the socket may form a pointer
// to basic_socket's protected member (it is never constructed); the acceptor's is private.
class SocketAccess : public tcp_socket {
public:
  static auto& impl(tcp_socket& s) noexcept { return (s.*(&SocketAccess::impl_)).get_implementation(); }
};
using AcceptorImpl = asio_detail::io_object_impl<asio_detail::reactive_socket_service<boost::asio::ip::tcp>,
                                                 tcp_acceptor::executor_type>;
struct AcceptorImplTag {
  using type = AcceptorImpl tcp_acceptor::*;
  friend type member(AcceptorImplTag) noexcept;
};
template struct Expose<AcceptorImplTag, &tcp_acceptor::impl_>;

inline auto& impl(tcp_socket& s) noexcept { return SocketAccess::impl(s); }
inline auto& impl(tcp_acceptor& a) noexcept { return (a.*member(AcceptorImplTag{})).get_implementation(); }

// A socket or an acceptor.
template <class T>
concept Pollable = std::is_same_v<T, tcp_socket> || std::is_same_v<T, tcp_acceptor>;

// The reactor's per-descriptor flags "an edge has come since the last exhausting operation",
// which descriptor_state keeps private.
struct TrySpeculative {
  using type = bool (Reactor::descriptor_state::*)[Reactor::max_ops];
  friend type member(TrySpeculative) noexcept;
};
template struct Expose<TrySpeculative, &Reactor::descriptor_state::try_speculative_>;

// The events the descriptor is registered for, the epoll instance, the function an operation
// completes with, and the descriptor's own: all private to Asio's reactor.
struct RegisteredEvents {
  using type = std::uint32_t Reactor::descriptor_state::*;
  friend type member(RegisteredEvents) noexcept;
};
template struct Expose<RegisteredEvents, &Reactor::descriptor_state::registered_events_>;
struct EpollFd {
  using type = int Reactor::*;
  friend type member(EpollFd) noexcept;
};
template struct Expose<EpollFd, &Reactor::epoll_fd_>;
using CompleteFunction = void (*)(void*, asio_detail::scheduler_operation*, const boost::system::error_code&,
                                  std::size_t);
struct OperationFunction {
  using type = CompleteFunction asio_detail::scheduler_operation::*;
  friend type member(OperationFunction) noexcept;
};
template struct Expose<OperationFunction, &asio_detail::scheduler_operation::func_>;
struct DescriptorComplete {
  using type = CompleteFunction;
  friend type member(DescriptorComplete) noexcept;
};
template struct Expose<DescriptorComplete, &Reactor::descriptor_state::do_complete>;

struct DescriptorReactor {
  using type = Reactor* Reactor::descriptor_state::*;
  friend type member(DescriptorReactor) noexcept;
};
template struct Expose<DescriptorReactor, &Reactor::descriptor_state::reactor_>;

// The reactor of the socket's io_context.
template <Pollable T>
Reactor& reactor_of(T& s) {
  // A registered descriptor names its reactor. (A per-thread cache keyed by the io_context's
  // address handed out a destroyed reactor once a new io_context took the old one's address on
  // the same thread: tests/proxy/session_harness.hpp found it.)
  if (auto* data = impl(s).reactor_data_) return *(data->*member(DescriptorReactor{}));
  return boost::asio::use_service<Reactor>(boost::asio::query(s.get_executor(), boost::asio::execution::context));
}

// Whether `s` is registered for EPOLLRDHUP (watch_hangup below).
template <Pollable T>
bool hangup_watched(T& s) noexcept {
  auto* data = impl(s).reactor_data_;
  return data != nullptr && (data->*member(RegisteredEvents{}) & EPOLLRDHUP) != 0;
}

// Records that `s` has just been proved drained for input (see above): the next readiness wait
// or read on it waits for the next edge instead of trying. No-op on a socket the reactor does not
// know.
template <Pollable T>
void drained(T& s) noexcept {
  auto* data = impl(s).reactor_data_;
  if (data == nullptr) return;
  auto& flags = data->*member(TrySpeculative{});
  flags[Reactor::read_op] = false;
  // Nor is a FIN pending: any that comes later is reported with EPOLLRDHUP (see watch_hangup).
  if (hangup_watched(s)) flags[Reactor::except_op] = false;
}

// Short reads as proofs (nginx's rule with EPOLLRDHUP). Once `s` is watched, a read that returned
// fewer bytes than asked drained the socket unless a FIN was pending: epoll reports the state at
// the time it hands an event out, so a FIN that came before then was reported with the bytes
// (EPOLLRDHUP), and one that came after raises an edge of its own. A reported hang-up is passed
// to the reactor as an exceptional condition, which sets the descriptor's except flag; nothing
// else does on a socket without out-of-band reads, and only drained() clears it again.
//
// The reactor calls this instead of Asio's own completion for a watched descriptor's events.
inline void complete_with_hangup(void* owner, asio_detail::scheduler_operation* base,
                                 const boost::system::error_code& ec, std::size_t events) {
  if ((events & EPOLLRDHUP) != 0) events |= EPOLLPRI;
  member(DescriptorComplete{})(owner, base, ec, events);
}

// Registers `s` for EPOLLRDHUP as well (one epoll_ctl, once per socket), so that its short reads
// can prove it drained (short_read). The FIN state before this is unknown: the first proof after
// it must be an EAGAIN (drained). Returns whether `s` is watched.
inline bool watch_hangup(tcp_socket& s) noexcept {
  auto* data = impl(s).reactor_data_;
  if (data == nullptr) return false;
  auto& registered = data->*member(RegisteredEvents{});
  if ((registered & EPOLLRDHUP) != 0) return true;
  if (registered == 0) return false;  // not in the epoll set (a type epoll refused)
  // Set before the descriptor can report a hang-up. Descriptor states are recycled by the
  // reactor: a later socket in this one keeps the function, which does nothing without EPOLLRDHUP.
  // (A C-style cast may name the private base.)
  ((asio_detail::scheduler_operation*)data)->*member(OperationFunction{}) = &complete_with_hangup;
  (data->*member(TrySpeculative{}))[Reactor::except_op] = true;
  epoll_event ev{};
  ev.events = registered | EPOLLRDHUP;
  ev.data.ptr = data;
  if (::epoll_ctl(reactor_of(s).*member(EpollFd{}), EPOLL_CTL_MOD, impl(s).socket_, &ev) != 0) return false;
  registered = ev.events;  // Asio's own epoll_ctl(MOD)s start from this: EPOLLRDHUP stays
  return true;
}

// `s` has just returned fewer bytes than asked: proved drained if it is watched and no hang-up
// was reported since the last drained() (see above); else nothing is known.
inline void short_read(tcp_socket& s) noexcept {
  auto* data = impl(s).reactor_data_;
  if (data == nullptr || !hangup_watched(s)) return;
  auto& flags = data->*member(TrySpeculative{});
  if (!flags[Reactor::except_op]) flags[Reactor::read_op] = false;
}

// Whether the next readiness wait or read on `s` will be tried at once (the reactor has seen an
// input edge since the socket was last proved drained, or never had it proved).
template <Pollable T>
bool will_try(T& s) noexcept {
  auto* data = impl(s).reactor_data_;
  return data == nullptr || (data->*member(TrySpeculative{}))[Reactor::read_op];
}

// recv, send and sendmsg without glibc's cancellation-point bracket: in a process of more than one
// thread glibc wraps each of those in __pthread_enable_asynccancel / _disable, two atomic
// read-modify-writes of the thread's cancel state per call. Nothing here is ever cancelled (a
// worker stops through its io_context), so the plain system call is all a worker needs. The
// bracket was 0.35 us of sluice's 36 per request in the kernel profile (bench/kprofile.py);
// nginx and HAProxy, single-threaded, skip it.
inline ssize_t sys_recv(int fd, void* data, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_recvfrom, fd, data, size, flags, nullptr, nullptr);
}
inline ssize_t sys_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}
inline ssize_t sys_sendmsg(int fd, const msghdr* msg, int flags) noexcept {
  return ::syscall(SYS_sendmsg, fd, msg, flags);
}

// A one-byte MSG_PEEK: true when the kernel has nothing for `fd` (EAGAIN: no byte, no FIN, no
// error), false when a read would return at once (bytes, end of stream or an error).
inline bool nothing_to_read(int fd) noexcept {
  char byte;
  const auto n = sys_recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

// The wait operation being started on this thread: its perform function is then a try at once
// (inside Reactor::start_op); any other call comes from the reactor, for an edge.
inline thread_local const void* starting_wait = nullptr;

class Cancellation {
public:
  Cancellation(Reactor* r, Reactor::per_descriptor_data* d, int fd) noexcept
      : reactor_(r), data_(d), fd_(fd) {}
  void operator()(boost::asio::cancellation_type_t type) {
    using boost::asio::cancellation_type;
    if (!!(type & (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total))) {
      reactor_->cancel_ops_by_key(fd_, *data_, Reactor::read_op, this);
    }
  }

private:
  Reactor* reactor_;
  Reactor::per_descriptor_data* data_;
  int fd_;
};

// Asio's operations keep a handler_work beside the handler: outstanding work on the I/O
// executor, and on completion a dispatch through the handler's executor unless it is the I/O
// executor. Neither is needed here, and with any_io_executor both cost: type-erased executor
// copies, their destruction and a comparison per wait (with the pool's single moves: 12,658 ->
// 11,704 instructions per request, bench/allocs_per_request.py --instr). The reactor counts a
// queued operation as the io_context's work itself (start_op), and every handler that waits here
// belongs to a coroutine of the io_context that runs the socket (checked in debug builds): it is
// invoked directly, as the dispatch would when the two executors are the same.
template <class Handler>
class WaitOp : public asio_detail::reactor_op {
public:
  BOOST_ASIO_DEFINE_HANDLER_PTR(WaitOp);

  WaitOp(int fd, Handler& handler)
      : reactor_op(boost::system::error_code(), &WaitOp::do_perform, &WaitOp::do_complete),
        fd_(fd), handler_(std::move(handler)) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<WaitOp*>(base);
    if (starting_wait != o) return done;  // the reactor saw an edge: readable, at end or failed
    return nothing_to_read(o->fd_) ? not_done : done;
  }

  static void do_complete(void* owner, asio_detail::operation* base, const boost::system::error_code&,
                          std::size_t) {
    auto* o = static_cast<WaitOp*>(base);
    ptr p = {std::addressof(o->handler_), o, o};
    asio_detail::binder1<Handler, boost::system::error_code> handler(o->handler_, o->ec_);
    p.h = std::addressof(handler.handler_);
    p.reset();
    if (owner) {
      asio_detail::fenced_block b(asio_detail::fenced_block::half);
      const TurnTime turn;  // the session's clock reads until its next wait: one vDSO call
      handler();
    }
  }

private:
  int fd_;
  Handler handler_;
};

// Starts `op` as a read-direction operation of `s`, as Asio's socket service does: per-operation
// cancellation if the handler had a connected slot, non-blocking mode, then the reactor (allowed
// to try the operation at once).
template <Pollable T, class Slot>
void start(T& s, asio_detail::reactor_op* op, bool is_continuation, Slot& slot) {
  auto& impl = edge::impl(s);
  auto& reactor = reactor_of(s);
  if (slot.is_connected()) {
    op->cancellation_key_ = &slot.template emplace<Cancellation>(&reactor, &impl.reactor_data_, impl.socket_);
  }
  if ((impl.state_ & asio_detail::socket_ops::non_blocking) != 0 ||
      asio_detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, op->ec_)) {
    reactor.start_op(Reactor::read_op, impl.socket_, impl.reactor_data_, op, is_continuation, true);
    return;
  }
  reactor.post_immediate_completion(op, is_continuation);
}

// async_initiate's initiation: the handler in, one operation on the socket out.
template <Pollable T>
struct InitiateWait {
  T* socket;

  template <class Handler>
  void operator()(Handler&& h) const {
    std::decay_t<Handler> handler(std::forward<Handler>(h));
    using Op = WaitOp<std::decay_t<Handler>>;
    assert(&boost::asio::query(boost::asio::get_associated_executor(handler, socket->get_executor()),
                               boost::asio::execution::context) ==
           &boost::asio::query(socket->get_executor(), boost::asio::execution::context));
    const bool is_continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    typename Op::ptr p = {std::addressof(handler), Op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) Op(impl(*socket).socket_, handler);
    auto* op = p.p;
    p.v = p.p = nullptr;
    starting_wait = op;
    start(*socket, op, is_continuation, slot);
    starting_wait = nullptr;
  }
};

// Waits until the socket has bytes, is at end of stream or has failed. Completion signature
// void(error_code).
// On an acceptor: until a connection is waiting to be accepted.
template <Pollable T, class Token>
auto async_wait_readable(T& s, Token&& token) {
  return boost::asio::async_initiate<Token, void(boost::system::error_code)>(InitiateWait<T>{&s}, token);
}

// The same wait awaited in an asio::awaitable coroutine with no coroutine of its own:
//   boost::system::error_code ec;
//   co_await edge::readable(socket, ec);
// use_awaitable runs every operation in a coroutine of its own (async_result's initiate(): a
// frame allocated, pushed onto the coroutine's thread of execution, popped and freed, the result
// moved through it), ~120 instructions per wait and two waits per proxied keep-alive request.
// Here the awaiting coroutine suspends through the hook Asio's own initiate() uses (the
// awaitable's await_transform of a function of the frame, run once the coroutine is suspended),
// its thread of execution becomes the wait's handler (Resume), and the completion stores the
// error code in the caller's variable and resumes that coroutine directly. Cancellation is the
// thread's, as with use_awaitable (the wait's slot is the coroutine's cancellation slot, cleared
// at completion).
using AwaitingExecutor = boost::asio::any_io_executor;
using AwaitingFrame = asio_detail::awaitable_frame_base<AwaitingExecutor>;
using AwaitingThread = asio_detail::awaitable_thread<AwaitingExecutor>;

class Resume : public AwaitingThread {
public:
  // Takes the thread of execution `frame`, the suspended awaiting coroutine, was running on.
  Resume(AwaitingFrame* frame, boost::system::error_code& result) noexcept
      : AwaitingThread(std::move(*frame->detach_thread())), frame_(frame), result_(&result) {}
  Resume(Resume&&) noexcept = default;

  void operator()(const boost::system::error_code& ec) {
    *result_ = ec;
    frame_->attach_thread(this);
    frame_->clear_cancellation_slot();
    this->pump();
  }

private:
  AwaitingFrame* frame_;
  boost::system::error_code* result_;
};

template <Pollable T>
auto readable(T& s, boost::system::error_code& ec) {
  return [&s, &ec](AwaitingFrame* frame) -> AwaitingThread* {
    InitiateWait<T>{&s}(Resume(frame, ec));
    return nullptr;
  };
}

// Gives `fd`, opened non-blocking by us, to `s` (registered with the reactor); Asio is told it is
// non-blocking, so its first operation sets nothing. On failure `fd` is closed.
//
// Asio takes an assigned descriptor for a possible duplicate and removes it from the epoll set
// before closing it (EPOLL_CTL_DEL, one system call per connection); the close does that for a
// descriptor that is not duplicated. Ours are not: accept4 and socket() just made them, and they
// are close-on-exec. The one moment they are duplicated is between fork() and exec() of a binary
// upgrade (upgrade.cpp), when a socket closed here stays open in the child, and so stays in this
// epoll set, until the exec: its events then reach a descriptor state the reactor has recycled,
// as a spurious readiness that every operation takes for what it is (a read or peek that finds
// nothing is queued again; the flags of edge_io only ever err towards a try).
inline void adopt(tcp_socket& s, const boost::asio::ip::tcp& protocol, int fd, boost::system::error_code& ec) {
  s.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  auto& state = impl(s).state_;
  state |= asio_detail::socket_ops::internal_non_blocking;
  state &= static_cast<asio_detail::socket_ops::state_type>(~asio_detail::socket_ops::possible_dup);
}

// One connection from `a`'s backlog, with accept4(SOCK_NONBLOCK | SOCK_CLOEXEC): non-blocking
// already (Asio's accept would leave that to an ioctl at the socket's first operation) and
// close-on-exec (so it does not leak into a binary upgrade's new process, as ::accept's do).
// `peer`: the client's address. Nothing waiting: a closed socket and would_block, and the
// acceptor is proved drained (its next readiness wait needs no try). An error: a closed socket
// and the error.
inline tcp_socket accept_now(tcp_acceptor& a, boost::asio::ip::tcp::endpoint& peer,
                             boost::system::error_code& ec) {
  tcp_socket socket(a.get_executor());
  auto& listener = impl(a);
  if ((listener.state_ & asio_detail::socket_ops::non_blocking) == 0 &&
      !asio_detail::socket_ops::set_internal_non_blocking(listener.socket_, listener.state_, true, ec)) {
    return socket;  // once per acceptor, as Asio's own accept does
  }
  socklen_t length = static_cast<socklen_t>(peer.capacity());
  const int fd = ::accept4(a.native_handle(), peer.data(), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      drained(a);
      ec = boost::asio::error::would_block;
    } else {
      ec.assign(errno, boost::system::system_category());
    }
    return socket;
  }
  peer.resize(length);
  adopt(socket, peer.protocol(), fd, ec);
  return socket;
}

// Opens `s` for `protocol` with socket(SOCK_NONBLOCK | SOCK_CLOEXEC), before a connect:
// non-blocking from the start (no ioctl at its first operation) and close-on-exec (Asio's open
// leaks it into a binary upgrade's new process, where an origin connection would stay open).
inline void open_socket(tcp_socket& s, const boost::asio::ip::tcp& protocol, boost::system::error_code& ec) {
  const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol.protocol());
  if (fd < 0) {
    ec.assign(errno, boost::system::system_category());
    return;
  }
  adopt(s, protocol, fd, ec);
}

}  // namespace sluice::tls::edge
