#pragma once
// Coroutine frames from the thread's FramePool for the member coroutines of chosen classes.
//
// The compiler allocates a coroutine's frame with its promise type's operator new, and finds the
// promise type through std::coroutine_traits<Return, Object&, Args...>. Specialising that for
// `net::awaitable<T>` members of one of our classes (allowed: the specialisation names a
// program-defined type) gives those coroutines PooledFrame<T>: Asio's own promise type, every
// behaviour of it unchanged, with an operator new and delete of its own. It adds no data member,
// so the promise's address and alignment within the frame are exactly those of Asio's promise,
// which Asio's get_return_object() relies on (coroutine_handle<awaitable_frame>::from_promise).
//
//   SLUICE_POOLED_COROUTINES(sluice::proxy::DownstreamSession)   // at namespace scope, after the class
//   SLUICE_POOLED_COROUTINES_TAKING(Hooks)             // free coroutines taking a Hooks first
#include <coroutine>
#include <cstddef>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "sluice/core/frame_pool.hpp"

namespace sluice {

template <class T>
class PooledFrame : public boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor> {
  using Base = boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor>;

public:
  static void* operator new(std::size_t size) { return FramePool::allocate(size); }
  static void operator delete(void* p, std::size_t size) noexcept { FramePool::deallocate(p, size); }

  // `co_await` of another awaitable: Asio's awaitable::await_suspend takes a handle typed on its
  // own promise type and uses only its promise, which is this object's base. The handle is
  // rebuilt for it from that promise (same address, see above). Every other co_await goes to
  // Asio's await_transform unchanged.
  template <class U>
  struct Nested {
    boost::asio::awaitable<U, boost::asio::any_io_executor> inner;
    bool await_ready() const noexcept { return inner.await_ready(); }
    void await_suspend(std::coroutine_handle<PooledFrame> h) {
      inner.await_suspend(std::coroutine_handle<Base>::from_promise(h.promise()));
    }
    U await_resume() { return inner.await_resume(); }
  };
  using Base::await_transform;
  template <class U>
  Nested<U> await_transform(boost::asio::awaitable<U, boost::asio::any_io_executor> a) const {
    return Nested<U>{Base::await_transform(std::move(a))};
  }
};

}  // namespace sluice

// Coroutines whose first parameter is of type `First` (a member coroutine's is its object, `Class&`).
#define SLUICE_POOLED_COROUTINES_TAKING(First)                                                  \
  template <class T, class... Args>                                                             \
  struct std::coroutine_traits<boost::asio::awaitable<T, boost::asio::any_io_executor>, First,  \
                               Args...> {                                                       \
    static_assert(sizeof(sluice::PooledFrame<T>) ==                                             \
                      sizeof(boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor>) && \
                  alignof(sluice::PooledFrame<T>) ==                                            \
                      alignof(boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor>)); \
    using promise_type = sluice::PooledFrame<T>;                                                \
  }
#define SLUICE_POOLED_COROUTINES(Class) SLUICE_POOLED_COROUTINES_TAKING(Class&)
