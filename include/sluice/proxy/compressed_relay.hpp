#pragma once
// The response relay of a compressed answer (docs/compression.md): as relay_response()
// (response_relay.hpp), with the same hooks plus
//   void sent_coded(std::string_view piece, std::size_t coded);
//                                // a piece of the origin's body went out as `coded` bytes
//   awaitable<void> wait_client_room(std::span<char>& relay, std::span<char>& coded, error_code&);
//                                // as relay_response()'s, with both spans in the block
//   awaitable<void> coding_failed(error_code, bool head_written);
//                                // the encoder failed: the answer ends there (sluice's failure)
// each piece of the origin's body is fed to the response's Encoder, the coded bytes written into
// `coded` (a block of its own) and each non-empty output sent as one chunk; after each piece the
// encoder is flushed, so that nothing the origin sent waits for its next bytes (a streaming
// origin's events reach the client one by one); at the end it is finished, then the last-chunk.
// An encoder error ends the answer (hooks.coding_failed). Not taken by relay_at_once(): the head of a
// compressed answer says chunked. `Encoder` is compress::Encoder, or a test's stand-in with its
// feed/flush/finish.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include "sluice/compress/encoder.hpp"
#include "sluice/proxy/response_relay.hpp"

namespace sluice::proxy {

// One step of coding a body piece with `enc`: fed while any of it is left (`piece` loses what was
// taken), then flushed, or finished with the body's last piece. The step's `done`: the piece is
// coded and all its output written (a feed is never done).
template <class Encoder>
auto code_step(Encoder& enc, std::string_view& piece, std::span<char> out, bool last) {
  if (piece.empty()) return last ? enc.finish(out) : enc.flush(out);
  auto step = enc.feed(piece, out);
  if (step) {
    piece.remove_prefix(step->consumed);
    step->done = false;
  }
  return step;
}

namespace detail {

struct CodedSend {
  boost::system::error_code encoder;  // the encoder failed: the coded stream is broken
  bool client_ok = true;              // false: the client write failed (hooks.client_failed was called)
  std::size_t coded = 0;              // bytes of coded body sent
};

// One chunk of coded bytes (none when empty), the head before it until it was written, the
// last-chunk after it when `last`. False when the client failed.
template <class Hooks, class Client>
boost::asio::awaitable<bool> write_coded(Hooks hooks, Client& client, std::string& head, bool& head_written,
                                         std::string_view coded, bool last) {
  const FramedPiece out(head_written ? std::string_view() : head, coded, true, last);
  hooks.writing();
  std::size_t n = 0;
  if constexpr (requires { client.try_write(out.buffers()); }) n = client.try_write(out.buffers());
  boost::system::error_code ec;
  if (n < boost::asio::buffer_size(out.buffers())) std::tie(ec, n) = co_await write_rest(client, out.buffers(), n);
  if (n > 0) hooks.head_reached();
  if (const auto failed = hooks.timed(ec)) {
    hooks.client_failed(failed);
    co_return false;
  }
  head_written = true;
  co_return true;
}

// `piece` fed whole, then a flush (or, when `last`, the finish and the last-chunk); each output
// of the encoder is sent as it comes.
template <class Hooks, class Client, class Encoder>
boost::asio::awaitable<CodedSend> send_coded(Hooks hooks, Client& client, std::string& head, bool& head_written,
                                             Encoder& enc, std::string_view piece,
                                             std::span<char> out, bool last) {
  CodedSend sent;
  for (;;) {
    const auto step = code_step(enc, piece, out, last);
    if (!step) {
      sent.encoder = step.error();
      co_return sent;
    }
    if (step->produced > 0 || (step->done && last)) {
      if (!co_await write_coded(hooks, client, head, head_written, {out.data(), step->produced}, step->done && last)) {
        sent.client_ok = false;
        co_return sent;
      }
      sent.coded += step->produced;
    }
    if (step->done) co_return sent;
  }
}

}  // namespace detail

// `relay`: where the origin's body is read; `coded`: where the encoder writes (any size; the
// relay's 16 KiB is plenty). Returns as relay_response() does.
template <class Hooks, class Upstream, class Buffer, class Client, class Encoder>
boost::asio::awaitable<bool> relay_compressed(Hooks hooks, Upstream& upstream, Buffer& in, Client& client,
                                              ResponseFraming framing, std::string& head, std::span<char> relay,
                                              std::span<char> coded, http::ChunkedDecoder& chunked,
                                              Encoder& enc) {
  const auto& plan = framing.plan;
  detail::BodyCursor body(plan, framing.content_length);
  const bool& done = body.done;
  bool head_written = false;
  bool waited = false;  // for the client's room
  for (;;) {
    std::string_view piece;
    BodyPiece read;
    if (!done) {
      if (detail::must_wait_for_room(hooks, body, in, relay.size(), waited)) {
        if (!co_await detail::wait_for_room(hooks, waited, relay, coded)) co_return false;
        continue;
      }
      read = body.buffered(in) ? body.take_buffered(in)
                               : co_await detail::next_response_piece(hooks, upstream, in, plan, body.content_left,
                                                                      relay, chunked, read_now(body.pieces_read_now));
      const auto ec = hooks.timed(read.ec);
      if (const auto failed = body.advance(read, ec, chunked); failed != FailureKind::none) {
        co_await hooks.body_failed(ec, head_written, failed);
        co_return false;
      }
      piece = read.bytes;
      if (piece.empty() && !done) continue;
    }
    const auto sent = co_await detail::send_coded(hooks, client, head, head_written, enc, piece, coded, done);
    if (sent.encoder) co_await hooks.coding_failed(sent.encoder, head_written);
    if (sent.encoder || !sent.client_ok) co_return false;
    hooks.sent_coded(piece, sent.coded);
    if (read.buffered) in.consume(piece.size());
    if (done) break;
  }
  hooks.done();
  co_return framing.reusable && !plan.until_close && in.size() == 0;
}

}  // namespace sluice::proxy
