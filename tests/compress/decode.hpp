#pragma once
// Test helper: a streaming decoder for each coding, from the libraries themselves (zlib, libzstd,
// libbrotlidec), so that a round trip proves the bytes decode as any client would decode them.
#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/compress/coding.hpp"

namespace sluice::compress::testing {

// Feed the coded bytes in any pieces; decoded() is everything they decode to so far. A decoder
// error leaves failed() true.
class Decoder {
public:
  explicit Decoder(Coding c) : coding_(c) {
    if (c == Coding::gzip) {
      ok_ = inflateInit2(&z_, 15 + 16) == Z_OK;
    } else if (c == Coding::zstd) {
      zstd_ = ZSTD_createDStream();
    } else {
      br_ = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
    }
  }
  ~Decoder() {
    if (coding_ == Coding::gzip) inflateEnd(&z_);
    ZSTD_freeDStream(zstd_);
    if (br_ != nullptr) BrotliDecoderDestroyInstance(br_);
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  void feed(std::string_view in) {
    if (coding_ == Coding::gzip)
      feed_gzip(in);
    else if (coding_ == Coding::zstd)
      feed_zstd(in);
    else
      feed_brotli(in);
  }
  const std::string& decoded() const { return out_; }
  bool failed() const { return !ok_; }
  bool ended() const { return ended_; }  // the coded stream's end marker was seen

private:
  void feed_gzip(std::string_view in) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    char buf[4096];
    while (ok_ && !ended_) {
      z_.next_out = reinterpret_cast<Bytef*>(buf);
      z_.avail_out = sizeof buf;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      out_.append(buf, sizeof buf - z_.avail_out);
      if (rc == Z_STREAM_END)
        ended_ = true;
      else if (rc == Z_BUF_ERROR)
        break;  // needs more input
      else if (rc != Z_OK)
        ok_ = false;
      if (z_.avail_in == 0 && z_.avail_out != 0) break;
    }
  }
  void feed_zstd(std::string_view in) {
    ZSTD_inBuffer input{in.data(), in.size(), 0};
    char buf[4096];
    while (ok_) {
      ZSTD_outBuffer output{buf, sizeof buf, 0};
      const auto rc = ZSTD_decompressStream(zstd_, &output, &input);
      if (ZSTD_isError(rc)) ok_ = false;
      out_.append(buf, output.pos);
      if (rc == 0) ended_ = true;
      if (input.pos == input.size && output.pos < output.size) break;
    }
  }
  void feed_brotli(std::string_view in) {
    std::size_t in_left = in.size();
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    while (ok_) {
      char buf[4096];
      std::size_t out_left = sizeof buf;
      auto* next_out = reinterpret_cast<std::uint8_t*>(buf);
      const auto rc =
          BrotliDecoderDecompressStream(br_, &in_left, &next_in, &out_left, &next_out, nullptr);
      out_.append(buf, sizeof buf - out_left);
      if (rc == BROTLI_DECODER_RESULT_ERROR) ok_ = false;
      if (rc == BROTLI_DECODER_RESULT_SUCCESS) ended_ = true;
      if (rc != BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) break;
    }
  }

  Coding coding_;
  z_stream z_{};
  ZSTD_DStream* zstd_ = nullptr;
  BrotliDecoderState* br_ = nullptr;
  std::string out_;
  bool ok_ = true;
  bool ended_ = false;
};

// The whole of `coded`, decoded; nullopt when it does not decode or does not end.
inline std::optional<std::string> decode_all(Coding c, std::string_view coded) {
  Decoder d(c);
  d.feed(coded);
  if (d.failed() || !d.ended()) return std::nullopt;
  return d.decoded();
}

}  // namespace sluice::compress::testing
