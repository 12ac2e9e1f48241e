// The compressed response relay (relay_compressed, compressed_relay.hpp) on beast::test::stream:
// a body in pieces of every size reaches the client chunked and coded, decodable to the body,
// each coded piece decodable before the next arrives; an encoder that fails before or after the
// head left ends the answer through coding_failed, blaming neither the origin nor the client.
#include "sluice/proxy/compressed_relay.hpp"

#include "../compress/decode.hpp"
#include "run_to_end.hpp"

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace sluice::proxy {
namespace {

namespace net = boost::asio;
namespace test = boost::beast::test;
using boost::system::error_code;

struct Seen {
  std::string body;       // the origin's pieces sent_coded() was told of
  std::size_t coded = 0;  // the coded bytes it was told of
  std::optional<FailureKind> body_failure;
  std::optional<bool> coding_failed;  // head_written when the encoder failed
  bool client_failed = false;
  bool done = false;
  int room_waits_left = 0;  // the client has no room for this many pieces in turn
  int room_waits = 0;
  std::span<char> other_relay, other_coded;
};

struct Hooks {
  Seen* seen;
  void reading() {}
  void writing() {}
  error_code timed(error_code ec) const { return ec; }
  void head_reached() {}
  net::awaitable<void> body_failed(error_code, bool, FailureKind failure) {
    seen->body_failure = failure;
    co_return;
  }
  net::awaitable<void> coding_failed(error_code, bool head_written) {
    seen->coding_failed = head_written;
    co_return;
  }
  void client_failed(error_code) { seen->client_failed = true; }
  bool client_has_room(std::size_t) {
    if (seen->room_waits_left == 0) return true;
    --seen->room_waits_left;
    return false;
  }
  // Both spans move to the test's other block, as the session moves them to another relay block.
  net::awaitable<void> wait_client_room(std::span<char>& relay, std::span<char>& coded, error_code&) {
    ++seen->room_waits;
    relay = seen->other_relay;
    coded = seen->other_coded;
    co_return;
  }
  void sent_coded(std::string_view piece, std::size_t coded) {
    seen->body.append(piece);
    seen->coded += coded;
  }
  void done() { seen->done = true; }
};

// An encoder that copies its input and fails at its `fail_at`th call (feed, flush or finish).
struct FailingEncoder {
  int fail_at;
  int calls = 0;
  boost::system::result<compress::Step> step(std::span<const char> in, std::span<char> out, bool feeding) {
    if (++calls == fail_at) return make_error_code(compress::Error::out_of_memory);
    const auto n = std::min(in.size(), out.size());
    std::copy_n(in.data(), n, out.data());
    return compress::Step{n, n, !feeding || n == in.size()};
  }
  auto feed(std::span<const char> in, std::span<char> out) { return step(in, out, true); }
  auto flush(std::span<char> out) { return step({}, out, false); }
  auto finish(std::span<char> out) { return step({}, out, false); }
};

const std::string head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string text(std::size_t n) {
  std::string s;
  while (s.size() < n) s += "sluice relays this line to the client, coded; ";
  s.resize(n);
  return s;
}

ResponseFraming content_length(std::uint64_t n) {
  ResponseFraming f;
  f.plan.body_expected = true;
  f.plan.chunked_out = true;
  f.plan.keep_alive = true;
  f.content_length = n;
  f.reusable = true;
  return f;
}

struct Relay {
  net::io_context io;
  test::stream upstream;
  test::stream origin_side{io};
  test::stream client{io};
  test::stream client_peer{io};
  boost::beast::flat_buffer in{64 * 1024};
  std::array<char, 64> relay{};  // small: a body of any size goes in several pieces
  std::array<char, 32> coded{};
  http::ChunkedDecoder chunked;
  std::string out_head;
  Seen seen;

  Relay(const std::string& wire, std::size_t read_size) : upstream(io, wire) {
    upstream.read_size(read_size);
    upstream.connect(origin_side);
    client.connect(client_peer);
  }

  template <class Encoder>
  std::optional<bool> run(ResponseFraming framing, Encoder& enc) {
    out_head = head;
    return test_support::run_to_end(io, relay_compressed(Hooks{&seen}, upstream, in, client, framing, out_head,
                                                         std::span(relay), std::span(coded), chunked, enc));
  }
  // The client's bytes after the head, de-chunked.
  std::string body_received() const {
    const auto got = client_peer.str();
    EXPECT_EQ(got.substr(0, head.size()), head);
    http::ChunkedDecoder decoder;
    std::string decoded(got.size(), '\0');
    const auto step = decoder.feed(std::string_view(got).substr(head.size()), std::span(decoded));
    EXPECT_EQ(step.status, http::ChunkedDecoder::Status::done);
    return decoded.substr(0, step.produced);
  }
};

TEST(RelayCompressed, ABodyInPiecesOfEverySizeReachesTheClientChunkedAndDecodable) {
  const auto body = text(3000);
  compress::EncoderPool pool;
  for (const auto c : {compress::Coding::gzip, compress::Coding::zstd, compress::Coding::br}) {
    for (const std::size_t piece : {1, 7, 64, 1000, 4096}) {
      auto enc = pool.acquire(c, 1, body.size());
      ASSERT_TRUE(enc);
      Relay r(body, piece);
      const auto reusable = r.run(content_length(body.size()), *enc);
      ASSERT_EQ(reusable, true) << "pieces of " << piece;
      EXPECT_TRUE(r.seen.done);
      EXPECT_EQ(r.seen.body, body);
      const auto coded = r.body_received();
      EXPECT_EQ(r.seen.coded, coded.size());
      EXPECT_EQ(compress::testing::decode_all(c, coded), body) << "pieces of " << piece;
      EXPECT_FALSE(r.seen.body_failure);
      EXPECT_FALSE(r.seen.coding_failed);
    }
  }
}

// A client with no room: the relay waits before each of those pieces and goes on in the blocks
// the wait gave it, the coded stream whole.
TEST(RelayCompressed, AClientWithoutRoomIsWaitedForAndTheRelayGoesOnInTheBlocksTheWaitGave) {
  const auto body = text(1000);
  compress::EncoderPool pool;
  auto enc = pool.acquire(compress::Coding::gzip, 1, body.size());
  ASSERT_TRUE(enc);
  Relay r(body, 1000);
  std::array<char, 64> other_relay{};
  std::array<char, 32> other_coded{};
  r.seen.other_relay = std::span(other_relay);
  r.seen.other_coded = std::span(other_coded);
  r.seen.room_waits_left = 3;
  ASSERT_EQ(r.run(content_length(body.size()), *enc), true);
  EXPECT_EQ(r.seen.room_waits, 3);
  EXPECT_EQ(compress::testing::decode_all(compress::Coding::gzip, r.body_received()), body);
  EXPECT_TRUE(r.seen.done);
}

// An encoder failing at its first call: nothing was sent, the session answers (with its own
// error, not the origin's); failing later: the head went out, the answer stops there.
TEST(RelayCompressed, AnEncoderFailureEndsTheAnswerAsSluicesOwnAtEveryStep) {
  const auto body = text(200);
  for (int fail_at = 1; fail_at < 40; ++fail_at) {
    FailingEncoder enc{fail_at};
    Relay r(body, 50);
    const auto reusable = r.run(content_length(body.size()), enc);
    if (enc.calls < fail_at) {  // every step succeeded: the body went whole
      EXPECT_EQ(reusable, true);
      EXPECT_EQ(r.body_received(), body);
      break;
    }
    ASSERT_EQ(reusable, false) << "failing at call " << fail_at;
    ASSERT_TRUE(r.seen.coding_failed) << "failing at call " << fail_at;
    EXPECT_EQ(*r.seen.coding_failed, !r.client_peer.str().empty()) << "failing at call " << fail_at;
    EXPECT_EQ(r.client_peer.str().find("0\r\n\r\n"), std::string::npos);  // never told it is whole
    EXPECT_FALSE(r.seen.body_failure);
    EXPECT_FALSE(r.seen.client_failed);
    EXPECT_FALSE(r.seen.done);
  }
}

}  // namespace
}  // namespace sluice::proxy
