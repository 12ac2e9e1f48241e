// gzip through zlib: one z_stream per context, deflateReset between responses (no allocation).
#include <limits>

#include <zlib.h>

#include "codec.hpp"

namespace sluice::compress {
namespace {

// 15: zlib's largest window (32 KiB), +16: the gzip wrapper (RFC 1952) instead of zlib's.
// memLevel 8: zlib's default; the state is ~256 KiB per context.
constexpr int gzip_window_bits = 15 + 16;
constexpr int gzip_mem_level = 8;

void* gzip_alloc(void* opaque, uInt items, uInt size) {
  return static_cast<EncoderPool*>(opaque)->allocate(std::size_t{items} * size);
}
void gzip_free(void* opaque, void* p) { static_cast<EncoderPool*>(opaque)->deallocate(p); }

class GzipCodec final : public Codec {
public:
  explicit GzipCodec(EncoderPool& pool) {
    stream_.zalloc = gzip_alloc;
    stream_.zfree = gzip_free;
    stream_.opaque = &pool;
  }
  ~GzipCodec() override {
    if (ready_) deflateEnd(&stream_);
  }
  bool init() noexcept {
    ready_ = deflateInit2(&stream_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, gzip_window_bits,
                          gzip_mem_level, Z_DEFAULT_STRATEGY) == Z_OK;
    level_ = Z_DEFAULT_COMPRESSION;
    return ready_;
  }
  Coding coding() const noexcept override { return Coding::gzip; }

  boost::system::error_code start(int level, std::uint64_t) noexcept override {
    if (deflateReset(&stream_) != Z_OK) return Error::library;
    // deflateParams on a fresh stream changes the level without touching the window.
    if (level != level_ && deflateParams(&stream_, level, Z_DEFAULT_STRATEGY) != Z_OK)
      return Error::library;
    level_ = level;
    return {};
  }

  boost::system::result<Step> run(std::span<const char> in, std::span<char> out,
                                  Op op) noexcept override {
    // z_stream counts in uInt: a larger span is taken in part (the caller loops anyway).
    constexpr std::size_t most = std::numeric_limits<uInt>::max();
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    stream_.avail_in = static_cast<uInt>(std::min(in.size(), most));
    stream_.next_out = reinterpret_cast<Bytef*>(out.data());
    stream_.avail_out = static_cast<uInt>(std::min(out.size(), most));
    const int flush = op == Op::process ? Z_NO_FLUSH : op == Op::flush ? Z_SYNC_FLUSH : Z_FINISH;
    const int rc = deflate(&stream_, flush);
    // Z_BUF_ERROR: nothing could be done (no input, or a flush repeated with nothing new) - not
    // an error for a stream (zlib.h).
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return Error::library;
    Step s;
    s.consumed = in.size() - stream_.avail_in;
    s.produced = out.size() - stream_.avail_out;
    switch (op) {
      case Op::process:
        s.done = stream_.avail_in == 0;
        break;
      // zlib.h: a flush is complete when deflate returns with output space left over.
      case Op::flush:
        s.done = stream_.avail_out != 0;
        break;
      case Op::finish:
        s.done = rc == Z_STREAM_END;
        break;
    }
    return s;
  }

private:
  z_stream stream_{};
  int level_ = Z_DEFAULT_COMPRESSION;
  bool ready_ = false;
};

}  // namespace

std::unique_ptr<Codec> make_gzip_codec(EncoderPool& pool) {
  auto codec = std::make_unique<GzipCodec>(pool);
  if (!codec->init()) return nullptr;
  return codec;
}

}  // namespace sluice::compress
