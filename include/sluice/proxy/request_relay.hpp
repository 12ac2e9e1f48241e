#pragma once
// The streamed request relay: the request head and a
// body read from the client as it comes, piece by piece, to the origin:
// stream_request_body(hooks, upstream, head, chunked, body_done). Each write is one FramedPiece
// (body_relay.hpp): the head with the first piece, a chunked body re-chunked as it passes (its
// pieces were validated by the client side's decoder before they come here), the last-chunk with
// the last piece. Templated on the stream, so that beast::test::stream and a fail-count loop
// drive it in unit tests (tests/proxy/request_relay_test.cpp); the session instantiates it for
// tls::Stream, in full duplex with the response head (upload.hpp, downstream_upload.cpp), and
// provides through a hooks value (first and by value: it lives in the coroutine's frame, and its
// class can take the frames from the worker's FramePool, SLUICE_POOLED_COROUTINES_TAKING):
//   awaitable<UploadPiece> next();   // the body's next piece (100-continue, reads, limits and the
//                                    //   client side's answers are the hooks'), or why it ends
//   awaitable<error_code> write(Stream&, std::span<const const_buffer>);
//                                    // one framed piece to the origin, under the upload's deadlines
//   bool stopped();                  // the response side stopped the upload (the origin answered)
//   FailureKind write_failed();      // what a failed write ends the upload as (none when the
//                                    //   response side had stopped it)
//   void sent(std::string_view piece);  // a piece reached the origin (consume it where it was)
//   void all_sent();                 // every byte is written
// Returns FailureKind::none when the whole request was written or the response side stopped
// the upload; else what ended it (the hooks' verdicts: the client's failure, a reset, a timeout).
#include <optional>
#include <span>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include "sluice/proxy/body_relay.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

// The body's next piece, as the client side read it: bytes (perhaps none: only chunk framing
// was read), whether they are the last, or what ends the upload instead.
struct UploadPiece {
  std::string_view bytes;
  bool last = false;
  std::optional<FailureKind> end;

  static UploadPiece ends(FailureKind why) noexcept {
    UploadPiece p;
    p.end = why;
    return p;
  }
};

template <class Hooks, class Stream>
boost::asio::awaitable<FailureKind> stream_request_body(Hooks hooks, Stream& upstream, std::string_view head,
                                                        bool chunked, bool body_done) {
  bool head_written = false;
  while (!body_done || !head_written) {
    if (hooks.stopped()) co_return FailureKind::none;
    std::string_view piece;
    if (!body_done) {
      const auto next = co_await hooks.next();
      if (next.end) co_return *next.end;
      piece = next.bytes;
      body_done = next.last;
      if (piece.empty() && !body_done) continue;  // only chunk framing was read
    }
    const FramedPiece out(head_written ? std::string_view() : head, piece, chunked, body_done);
    if (co_await hooks.write(upstream, out.buffers())) co_return hooks.write_failed();
    head_written = true;
    hooks.sent(piece);
  }
  hooks.all_sent();
  co_return FailureKind::none;
}

}  // namespace sluice::proxy
