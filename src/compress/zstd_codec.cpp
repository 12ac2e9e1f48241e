// zstd through libzstd's streaming API: one ZSTD_CCtx per context, reset between responses; its
// workspace is kept, so a response of the same level allocates nothing.
// ZSTD_createCCtx_advanced (the allocation functions) and ZSTD_c_srcSizeHint are in zstd's
// "experimental" section, which libzstd.so exports; both have been there unchanged since 1.4.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <climits>

#include "codec.hpp"

namespace sluice::compress {
namespace {

// A 512 KiB window (level 3 would take 2 MiB for a body of unknown size): the context's memory
// is per response in flight, and few responses an edge compresses are larger. Decoders must
// accept windows up to 8 MiB (RFC 8878 §3.1.1.1.2), so any is fine to them.
constexpr int zstd_window_log = 19;

class ZstdCodec final : public Codec {
public:
  explicit ZstdCodec(EncoderPool& pool)
      : ctx_(ZSTD_createCCtx_advanced({pool_allocate, pool_deallocate, &pool})) {}
  ~ZstdCodec() override { ZSTD_freeCCtx(ctx_); }
  bool made() const noexcept { return ctx_ != nullptr; }
  Coding coding() const noexcept override { return Coding::zstd; }

  boost::system::error_code start(int level, std::uint64_t size_hint) noexcept override {
    // session_only keeps the parameters; the level and window are set again anyway (cheap).
    // The size hint (not a pledge: a body cut short must not be a zstd error) lets zstd take
    // smaller tables and window for a small body; the workspace a larger one made is kept.
    const auto hint = static_cast<int>(std::min<std::uint64_t>(size_hint, ZSTD_SRCSIZEHINT_MAX));
    if (ZSTD_isError(ZSTD_CCtx_reset(ctx_, ZSTD_reset_session_only)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_windowLog, zstd_window_log)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ctx_, ZSTD_c_srcSizeHint, hint)))
      return Error::library;
    return {};
  }

  boost::system::result<Step> run(std::span<const char> in, std::span<char> out,
                                  Op op) noexcept override {
    ZSTD_inBuffer input{in.data(), in.size(), 0};
    ZSTD_outBuffer output{out.data(), out.size(), 0};
    const auto mode = op == Op::process ? ZSTD_e_continue
                      : op == Op::flush ? ZSTD_e_flush
                                        : ZSTD_e_end;
    // For flush and end, the result is what is left to write (0: done).
    const std::size_t rc = ZSTD_compressStream2(ctx_, &output, &input, mode);
    if (ZSTD_isError(rc))
      return ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation ? Error::out_of_memory
                                                                   : Error::library;
    Step s;
    s.consumed = input.pos;
    s.produced = output.pos;
    s.done = op == Op::process ? input.pos == input.size : rc == 0;
    return s;
  }

private:
  ZSTD_CCtx* ctx_;
};

}  // namespace

std::unique_ptr<Codec> make_zstd_codec(EncoderPool& pool) {
  auto codec = std::make_unique<ZstdCodec>(pool);
  if (!codec->made()) return nullptr;
  return codec;
}

}  // namespace sluice::compress
