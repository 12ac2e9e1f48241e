// The Encoder handle and the per-worker EncoderPool: idle library contexts per coding, and a
// cache of the blocks the libraries allocate, by power-of-two size class.
#include "sluice/compress/encoder.hpp"

#include <bit>
#include <cstdlib>
#include <string>

#include "codec.hpp"

namespace sluice::compress {
namespace {

class CompressCategory final : public boost::system::error_category {
public:
  const char* name() const noexcept override { return "sluice.compress"; }
  std::string message(int ev) const override {
    switch (static_cast<Error>(ev)) {
      case Error::out_of_memory:
        return "compression: out of memory";
      case Error::library:
        return "compression: the library refused the call";
    }
    return "compression: unknown error";
  }
};

constexpr std::size_t smallest_class_log = 5;  // 32 bytes

std::size_t coding_slot(Coding c) noexcept { return static_cast<std::size_t>(c) - 1; }

}  // namespace

const boost::system::error_category& error_category() noexcept {
  static const CompressCategory category;
  return category;
}

boost::system::error_code make_error_code(Error e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// --- Encoder ---

Encoder::Encoder(Encoder&& other) noexcept : codec_(other.codec_), pool_(other.pool_) {
  other.codec_ = nullptr;
}

Encoder& Encoder::operator=(Encoder&& other) noexcept {
  if (this != &other) {
    release();
    codec_ = other.codec_;
    pool_ = other.pool_;
    other.codec_ = nullptr;
  }
  return *this;
}

Encoder::~Encoder() { release(); }

void Encoder::release() noexcept {
  if (codec_ != nullptr) pool_->release(codec_);
  codec_ = nullptr;
}

Coding Encoder::coding() const noexcept {
  return codec_ != nullptr ? codec_->coding() : Coding::identity;
}

boost::system::result<Step> Encoder::feed(std::span<const char> in, std::span<char> out) noexcept {
  return codec_->run(in, out, Codec::Op::process);
}

boost::system::result<Step> Encoder::flush(std::span<char> out) noexcept {
  return codec_->run({}, out, Codec::Op::flush);
}

boost::system::result<Step> Encoder::finish(std::span<char> out) noexcept {
  return codec_->run({}, out, Codec::Op::finish);
}

// --- EncoderPool ---

// A cached or handed-out block's header: 16 bytes, so the block itself keeps malloc's alignment.
struct EncoderPool::Block {
  Block* next;
  std::size_t size_class;
};

EncoderPool::EncoderPool(PoolLimits limits) : limits_(limits) {
  // Reserved now, so that handing a context back never allocates.
  for (auto& list : idle_) list.reserve(limits_.idle_per_coding);
}

EncoderPool::~EncoderPool() {
  for (auto& list : idle_) list.clear();
  drop_cache();
}

boost::system::result<Encoder> EncoderPool::acquire(Coding c, int level,
                                                    std::uint64_t size_hint) noexcept {
  if (c == Coding::identity) return Error::library;
  auto& list = idle_[coding_slot(c)];
  std::unique_ptr<Codec> codec;
  if (!list.empty()) {
    codec = std::move(list.back());
    list.pop_back();
  } else {
    ++stats_.contexts_made;
    try {
      codec = c == Coding::gzip   ? make_gzip_codec(*this)
              : c == Coding::zstd ? make_zstd_codec(*this)
                                  : make_brotli_codec(*this);
    } catch (const std::bad_alloc&) {
      return Error::out_of_memory;
    }
    if (!codec) return Error::out_of_memory;
  }
  if (const auto ec = codec->start(level, size_hint)) {
    release(codec.release());
    return ec;
  }
  return Encoder(codec.release(), this);
}

void EncoderPool::release(Codec* codec) noexcept {
  codec->stop();
  auto& list = idle_[coding_slot(codec->coding())];
  if (list.size() < limits_.idle_per_coding)
    list.emplace_back(codec);
  else
    delete codec;
}

void EncoderPool::shed() noexcept {
  for (auto& list : idle_) list.clear();
  drop_cache();
}

void* EncoderPool::allocate(std::size_t n) noexcept {
  const auto log = std::max<std::size_t>(std::bit_width(n > 0 ? n - 1 : 0), smallest_class_log);
  const auto size_class = log - smallest_class_log;
  if (size_class >= classes) return nullptr;
  if (Block* b = free_[size_class]) {
    free_[size_class] = b->next;
    stats_.cached_bytes -= std::size_t{1} << log;
    ++stats_.cache_hits;
    return b + 1;
  }
  auto* b = static_cast<Block*>(std::malloc(sizeof(Block) + (std::size_t{1} << log)));
  if (b == nullptr) return nullptr;
  ++stats_.system_allocs;
  b->size_class = size_class;
  return b + 1;
}

void EncoderPool::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  Block* b = static_cast<Block*>(p) - 1;
  const std::size_t size = std::size_t{1} << (b->size_class + smallest_class_log);
  if (stats_.cached_bytes + size > limits_.cached_bytes) {
    std::free(b);
    return;
  }
  b->next = free_[b->size_class];
  free_[b->size_class] = b;
  stats_.cached_bytes += size;
}

void EncoderPool::drop_cache() noexcept {
  for (auto& head : free_) {
    while (head != nullptr) {
      Block* next = head->next;
      std::free(head);
      head = next;
    }
  }
  stats_.cached_bytes = 0;
}

Plan take_encoder(Plan plan, const Policy& policy, EncoderPool& pool, std::uint64_t size_hint, Encoder& out) noexcept {
  if (!plan.compress()) return plan;
  auto encoder = pool.acquire(plan.coding, policy.levels.of(plan.coding), size_hint);
  if (!encoder) {
    plan.coding = Coding::identity;
    plan.weaken_etag = false;
    return plan;
  }
  out = std::move(*encoder);
  return plan;
}

}  // namespace sluice::compress
