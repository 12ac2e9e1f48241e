// The one translation unit that compiles Asio and Beast (separate compilation):
// every other file sees only declarations, so a one-file change rebuilds in seconds.
//
// One change to how Asio allocates: the epoll reactor's per-descriptor state. Asio never frees
// one (a closed socket's goes to a free list for the next socket), and it allocates them one by
// one as connections arrive, in between the sessions, frames and buffers of those connections.
// After a burst of a thousand connections ends, each survivor then pins a page of the heap that
// is otherwise free: 7-8 MB that malloc_trim() cannot give back. Taken here from slabs of 64,
// they stay together, a few pages in all.
#include <boost/asio/detail/config.hpp>

#if defined(BOOST_ASIO_HAS_EPOLL)
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/object_pool.hpp>

namespace boost::asio::detail {

namespace {

class DescriptorStateSlabs {
public:
  static constexpr std::size_t per_slab = 64;
  static constexpr std::size_t size = sizeof(epoll_reactor::descriptor_state);
  static constexpr std::align_val_t align{alignof(epoll_reactor::descriptor_state)};

  void* take() {
    const std::lock_guard lock(mutex_);
    if (left_ == 0) {
      // Never freed: the reactors keep their descriptor states until they are destroyed, and a
      // slab holds the states of several. Listed, so that a leak checker sees them held.
      next_ = static_cast<std::byte*>(::operator new(per_slab * size, align));
      slabs_.push_back(next_);
      left_ = per_slab;
    }
    void* p = next_;
    next_ += size;
    --left_;
    return p;
  }

private:
  std::mutex mutex_;  // reactors of several threads share the slabs
  std::vector<std::byte*> slabs_;
  std::byte* next_ = nullptr;
  std::size_t left_ = 0;
};

DescriptorStateSlabs& descriptor_state_slabs() {
  static auto* slabs = new DescriptorStateSlabs;  // outlives every reactor, even a static one
  return *slabs;
}

}  // namespace

template <>
epoll_reactor::descriptor_state* object_pool_access::create<epoll_reactor::descriptor_state, bool>(bool locking) {
  return new (descriptor_state_slabs().take()) epoll_reactor::descriptor_state(locking);
}

template <>
void object_pool_access::destroy<epoll_reactor::descriptor_state>(epoll_reactor::descriptor_state* o) {
  o->~descriptor_state();  // its slab's memory stays with the slabs
}

}  // namespace boost::asio::detail
#endif

#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
