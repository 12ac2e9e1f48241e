// brotli through libbrotlienc. The library has no reset: each response gets a new encoder
// state, made from the pool's cached blocks (EncoderPool::allocate), so that a warm worker does
// not go to malloc for it.
#include <algorithm>
#include <bit>

#include <brotli/encode.h>

#include "codec.hpp"

namespace sluice::compress {
namespace {

// A 512 KiB window, as ngx_brotli's default (brotli's own is 4 MiB): memory per response in
// flight, for bodies that are seldom larger.
constexpr int brotli_window_bits = 19;

class BrotliCodec final : public Codec {
public:
  explicit BrotliCodec(EncoderPool& pool) : pool_(pool) {}
  ~BrotliCodec() override { stop(); }
  Coding coding() const noexcept override { return Coding::br; }

  boost::system::error_code start(int level, std::uint64_t size_hint) noexcept override {
    stop();
    state_ = BrotliEncoderCreateInstance(pool_allocate, pool_deallocate, &pool_);
    if (state_ == nullptr) return Error::out_of_memory;
    // A body of known size needs no window larger than itself (brotli's streaming encoder does
    // not shrink it alone): the ring buffer is the larger part of its memory.
    const auto hint = static_cast<std::uint32_t>(std::min<std::uint64_t>(size_hint, 1U << 30));
    const int window = hint == 0 ? brotli_window_bits
                                 : std::clamp(static_cast<int>(std::bit_width(hint - 1)),
                                              BROTLI_MIN_WINDOW_BITS, brotli_window_bits);
    if (!BrotliEncoderSetParameter(state_, BROTLI_PARAM_QUALITY,
                                   static_cast<std::uint32_t>(level)) ||
        !BrotliEncoderSetParameter(state_, BROTLI_PARAM_LGWIN,
                                   static_cast<std::uint32_t>(window)) ||
        !BrotliEncoderSetParameter(state_, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT) ||
        (hint != 0 && !BrotliEncoderSetParameter(state_, BROTLI_PARAM_SIZE_HINT, hint)))
      return Error::library;
    return {};
  }

  boost::system::result<Step> run(std::span<const char> in, std::span<char> out,
                                  Op op) noexcept override {
    std::size_t in_left = in.size();
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    std::size_t out_left = out.size();
    auto* next_out = reinterpret_cast<std::uint8_t*>(out.data());
    const auto mode = op == Op::process ? BROTLI_OPERATION_PROCESS
                      : op == Op::flush ? BROTLI_OPERATION_FLUSH
                                        : BROTLI_OPERATION_FINISH;
    // BROTLI_FALSE: a bad call or an allocation that failed; the library does not say which,
    // and the calls here follow its contract, so memory it is.
    if (!BrotliEncoderCompressStream(state_, mode, &in_left, &next_in, &out_left, &next_out,
                                     nullptr))
      return Error::out_of_memory;
    Step s;
    s.consumed = in.size() - in_left;
    s.produced = out.size() - out_left;
    switch (op) {
      case Op::process:
        s.done = in_left == 0;
        break;
      case Op::flush:
        s.done = !BrotliEncoderHasMoreOutput(state_);
        break;
      case Op::finish:
        s.done = BrotliEncoderIsFinished(state_);
        break;
    }
    return s;
  }

  void stop() noexcept override {
    if (state_ != nullptr) BrotliEncoderDestroyInstance(state_);
    state_ = nullptr;
  }

private:
  EncoderPool& pool_;
  BrotliEncoderState* state_ = nullptr;
};

}  // namespace

std::unique_ptr<Codec> make_brotli_codec(EncoderPool& pool) {
  return std::make_unique<BrotliCodec>(pool);
}

}  // namespace sluice::compress
