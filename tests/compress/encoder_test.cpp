// The streaming encoders (compress/encoder.hpp): round trips through the libraries' own
// decoders, in pieces of every awkward size, through output buffers down to one byte; flush
// makes what was fed decodable; contexts come back to the pool and are reused without malloc.
#include "sluice/compress/encoder.hpp"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "decode.hpp"

namespace sluice::compress {
namespace {

using testing::decode_all;
using testing::Decoder;

constexpr std::array<Coding, 3> all_codings = {Coding::gzip, Coding::zstd, Coding::br};

int default_level(Coding c) { return Levels{}.of(c); }

// A JSON-ish text with enough repetition to compress and enough variety not to be trivial.
std::string sample_text(std::size_t n, std::uint32_t seed = 7) {
  static constexpr std::array<std::string_view, 8> words = {
      "alpha", "server", "request", "latency", "upstream", "healthy", "draining", "weight"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) {
    s += "{\"id\":" + std::to_string(rng() % 100000) + ",\"name\":\"" +
         std::string(words[rng() % 8]) + "\",\"score\":" + std::to_string(rng() % 1000) + "},\n";
  }
  s.resize(n);
  return s;
}

// Drives one encoder the way the relay does: `piece_sizes` cycled over the input, an output
// buffer of `out_size` bytes, a flush after every `flush_every` pieces (0: never), then finish.
// Checks on the way that nothing is written past the output span.
std::string encode_in_pieces(Encoder& enc, std::string_view input,
                             std::span<const std::size_t> piece_sizes, std::size_t out_size,
                             std::size_t flush_every = 0) {
  std::string coded;
  std::vector<char> buffer(out_size + 16, '\x5a');
  const std::span<char> out(buffer.data(), out_size);
  const auto take = [&](std::size_t produced) {
    EXPECT_LE(produced, out_size);
    coded.append(buffer.data(), produced);
  };
  const auto drain = [&](auto call) {
    for (int guard = 0; guard < 1'000'000; ++guard) {
      auto step = call();
      EXPECT_TRUE(step) << step.error().message();
      if (!step) return;
      take(step->produced);
      if (step->done) return;
    }
    ADD_FAILURE() << "never done";
  };
  std::size_t at = 0;
  for (std::size_t i = 0; at < input.size(); ++i) {
    auto piece = input.substr(at, piece_sizes[i % piece_sizes.size()]);
    at += piece.size();
    while (!piece.empty()) {
      auto step = enc.feed(piece, out);
      EXPECT_TRUE(step);
      if (!step) return coded;
      take(step->produced);
      piece.remove_prefix(step->consumed);
      EXPECT_EQ(step->done, piece.empty());
    }
    if (flush_every != 0 && (i + 1) % flush_every == 0) drain([&] { return enc.flush(out); });
  }
  drain([&] { return enc.finish(out); });
  for (std::size_t i = out_size; i < buffer.size(); ++i)
    EXPECT_EQ(buffer[i], '\x5a') << "written past the span";
  return coded;
}

class EncoderRoundTrip : public ::testing::TestWithParam<Coding> {};

TEST_P(EncoderRoundTrip, OddPiecesThroughATinyOutputBufferDecodeToTheSameBytes) {
  EncoderPool pool;
  const auto input = sample_text(200'000);
  const std::size_t pieces[] = {1, 7, 13, 4096, 3, 65'537, 2, 999};
  for (const std::size_t out_size : {1, 7, 4096}) {
    auto enc = pool.acquire(GetParam(), default_level(GetParam()));
    ASSERT_TRUE(enc);
    const auto coded = encode_in_pieces(*enc, input, pieces, out_size);
    EXPECT_LT(coded.size(), input.size() / 3) << "out " << out_size;
    EXPECT_EQ(decode_all(GetParam(), coded), input) << "out " << out_size;
  }
}

TEST_P(EncoderRoundTrip, FlushesBetweenPiecesStillDecodeToTheSameBytes) {
  EncoderPool pool;
  const auto input = sample_text(50'000);
  const std::size_t pieces[] = {100, 1, 5000};
  auto enc = pool.acquire(GetParam(), default_level(GetParam()));
  ASSERT_TRUE(enc);
  EXPECT_EQ(decode_all(GetParam(), encode_in_pieces(*enc, input, pieces, 512, 1)), input);
}

TEST_P(EncoderRoundTrip, ALargeBodyBeyondTheWindowDecodesToTheSameBytes) {
  EncoderPool pool;
  const auto input = sample_text(6 * 1024 * 1024, 11);
  const std::size_t pieces[] = {64 * 1024};
  auto enc = pool.acquire(GetParam(), default_level(GetParam()), input.size());
  ASSERT_TRUE(enc);
  const auto coded = encode_in_pieces(*enc, input, pieces, 16 * 1024, 4);
  EXPECT_EQ(decode_all(GetParam(), coded), input);
}

TEST_P(EncoderRoundTrip, AnEmptyBodyIsAValidEmptyStream) {
  EncoderPool pool;
  auto enc = pool.acquire(GetParam(), default_level(GetParam()));
  ASSERT_TRUE(enc);
  const auto coded = encode_in_pieces(*enc, "", std::array<std::size_t, 1>{1}, 64);
  EXPECT_FALSE(coded.empty());  // the coding's framing: a client must still be able to decode it
  EXPECT_EQ(decode_all(GetParam(), coded), "");
}

TEST_P(EncoderRoundTrip, BinaryBytesSurviveToo) {
  EncoderPool pool;
  std::string input(70'000, '\0');
  std::mt19937 rng(3);
  for (auto& c : input) c = static_cast<char>(rng());
  auto enc = pool.acquire(GetParam(), default_level(GetParam()));
  ASSERT_TRUE(enc);
  const std::size_t pieces[] = {333};
  EXPECT_EQ(decode_all(GetParam(), encode_in_pieces(*enc, input, pieces, 1000)), input);
}

// What flush promises the relay: after it, the client can decode every byte fed so far, before
// the stream ends (a streaming origin's events are not held back).
TEST_P(EncoderRoundTrip, AfterFlushEverythingFedSoFarDecodes) {
  EncoderPool pool;
  auto enc = pool.acquire(GetParam(), default_level(GetParam()));
  ASSERT_TRUE(enc);
  Decoder client(GetParam());
  std::array<char, 256> out;
  std::string fed;
  for (int event = 0; event < 5; ++event) {
    const auto piece = "data: event " + std::to_string(event) + "\n\n";
    fed += piece;
    std::string_view rest = piece;
    while (!rest.empty()) {
      auto step = enc->feed(rest, out);
      ASSERT_TRUE(step);
      client.feed({out.data(), step->produced});
      rest.remove_prefix(step->consumed);
    }
    for (bool done = false; !done;) {
      auto step = enc->flush(out);
      ASSERT_TRUE(step);
      client.feed({out.data(), step->produced});
      done = step->done;
    }
    ASSERT_FALSE(client.failed());
    EXPECT_EQ(client.decoded(), fed) << "event " << event;
    EXPECT_FALSE(client.ended());
  }
}

INSTANTIATE_TEST_SUITE_P(Codings, EncoderRoundTrip, ::testing::ValuesIn(all_codings),
                         [](const auto& info) { return std::string(token(info.param)); });

class EncoderPoolReuse : public ::testing::TestWithParam<Coding> {};

std::string one_response(EncoderPool& pool, Coding c, std::string_view body) {
  auto enc = pool.acquire(c, default_level(c), body.size());
  EXPECT_TRUE(enc);
  if (!enc) return {};
  const std::size_t pieces[] = {16 * 1024};
  return encode_in_pieces(*enc, body, pieces, 16 * 1024, 1);
}

// A worker's steady state: after the first responses, a compressed response takes its context
// (and brotli its blocks) from the pool, and the libraries do not go to malloc. brotli's block
// sizes follow the body (its buffers grow with what it finds), so its warm-up is per shape of
// body: the same bodies again allocate nothing; zlib and zstd keep one workspace whatever comes.
TEST_P(EncoderPoolReuse, AWarmPoolServesAResponseWithoutSystemAllocations) {
  EncoderPool pool;
  const auto c = GetParam();
  for (std::uint32_t seed = 20; seed < 23; ++seed) {
    const auto body = sample_text(100'000, seed);
    ASSERT_EQ(decode_all(c, one_response(pool, c, body)), body);
  }
  const auto before = pool.stats();
  EXPECT_EQ(before.contexts_made, 1U);
  const std::uint32_t first = c == Coding::br ? 20 : 30;
  for (std::uint32_t seed = first; seed < first + 3; ++seed) {
    const auto body = sample_text(100'000, seed);
    EXPECT_EQ(decode_all(c, one_response(pool, c, body)), body);
  }
  EXPECT_EQ(pool.stats().system_allocs, before.system_allocs);
  EXPECT_EQ(pool.stats().contexts_made, 1U);
}

// A response cut short (the client went away) hands back a context mid-stream; the next response
// on it starts clean.
TEST_P(EncoderPoolReuse, AnAbandonedStreamLeavesNothingForTheNextResponse) {
  EncoderPool pool;
  const auto c = GetParam();
  {
    auto enc = pool.acquire(c, default_level(c));
    ASSERT_TRUE(enc);
    std::array<char, 64> out;
    const auto half = sample_text(30'000, 5);
    ASSERT_TRUE(enc->feed(half, out));
  }
  const auto body = sample_text(40'000, 6);
  EXPECT_EQ(decode_all(c, one_response(pool, c, body)), body);
  EXPECT_EQ(pool.stats().contexts_made, 1U);
}

// Another level on a reused context takes effect (levels are per route).
TEST_P(EncoderPoolReuse, ALevelChangeOnAReusedContextTakesEffect) {
  EncoderPool pool;
  const auto c = GetParam();
  const auto body = sample_text(300'000, 9);
  const std::size_t pieces[] = {16 * 1024};
  auto coded_at = [&](int level) {
    auto enc = pool.acquire(c, level);
    EXPECT_TRUE(enc);
    return encode_in_pieces(*enc, body, pieces, 16 * 1024);
  };
  const auto fast = coded_at(level_range(c).min);
  const auto strong = coded_at(level_range(c).min + 5);
  EXPECT_EQ(decode_all(c, fast), body);
  EXPECT_EQ(decode_all(c, strong), body);
  EXPECT_LT(strong.size(), fast.size());
  EXPECT_EQ(pool.stats().contexts_made, 1U);
}

TEST_P(EncoderPoolReuse, IdleContextsAreBoundedAndShedFreesThemAll) {
  EncoderPool pool(PoolLimits{.idle_per_coding = 2, .cached_bytes = 16 * 1024 * 1024});
  const auto c = GetParam();
  {
    std::vector<Encoder> busy;
    for (int i = 0; i < 4; ++i) busy.push_back(std::move(*pool.acquire(c, default_level(c))));
  }  // four back: two kept, two freed
  EXPECT_EQ(pool.stats().contexts_made, 4U);
  for (int i = 0; i < 2; ++i) (void)pool.acquire(c, default_level(c));
  EXPECT_EQ(pool.stats().contexts_made, 4U);  // the kept ones served
  std::vector<Encoder> three;
  for (int i = 0; i < 3; ++i) three.push_back(std::move(*pool.acquire(c, default_level(c))));
  EXPECT_EQ(pool.stats().contexts_made, 5U);  // two idle, then one new
  three.clear();
  pool.shed();
  EXPECT_EQ(pool.stats().cached_bytes, 0U);
  (void)pool.acquire(c, default_level(c));
  EXPECT_EQ(pool.stats().contexts_made, 6U);
}

INSTANTIATE_TEST_SUITE_P(Codings, EncoderPoolReuse, ::testing::ValuesIn(all_codings),
                         [](const auto& info) { return std::string(token(info.param)); });

TEST(EncoderPool, IdentityIsNotAnEncoder) {
  EncoderPool pool;
  const auto enc = pool.acquire(Coding::identity, 0);
  ASSERT_FALSE(enc);
  EXPECT_EQ(enc.error(), make_error_code(Error::library));
}

TEST(EncoderPool, AnEncoderMovedFromHandsBackNothingTwice) {
  EncoderPool pool;
  auto a = pool.acquire(Coding::gzip, 6);
  ASSERT_TRUE(a);
  Encoder b = std::move(*a);
  EXPECT_FALSE(*a);
  EXPECT_TRUE(b);
  EXPECT_EQ(b.coding(), Coding::gzip);
  b = Encoder();
  EXPECT_EQ(pool.acquire(Coding::gzip, 6)->coding(), Coding::gzip);
  EXPECT_EQ(pool.stats().contexts_made, 1U);
}

}  // namespace
}  // namespace sluice::compress
