#include "sluice/http/chunked.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace {

using sluice::http::ChunkedDecoder;
using sluice::http::Violation;
using Status = ChunkedDecoder::Status;

struct Outcome {
  Status status = Status::need_more;
  Violation violation = Violation::none;
  std::string data;
  std::size_t consumed = 0;  // input bytes used when the decoder stopped
};

// Feeds `body` in pieces of `piece` bytes (all at once when 0) through an output of `out_size`.
Outcome decode(std::string_view body, std::size_t piece = 0, std::size_t out_size = 64,
               ChunkedDecoder::Limits limits = {}) {
  ChunkedDecoder d(limits);
  Outcome r;
  std::string out(out_size, '\0');
  std::size_t at = 0;
  while (at < body.size()) {
    const auto n = piece == 0 ? body.size() - at : std::min(piece, body.size() - at);
    auto in = body.substr(at, n);
    for (;;) {
      const auto s = d.feed(in, out);
      r.data.append(out.data(), s.produced);
      r.consumed = at + s.consumed;
      r.status = s.status;
      r.violation = s.violation;
      in.remove_prefix(s.consumed);
      if (s.status != Status::need_more) return r;
      if (in.empty()) break;
    }
    at += n;
  }
  return r;
}

Violation violation_of(std::string_view body) { return decode(body).violation; }

TEST(Chunked, DecodesChunksAndStopsAfterTheTrailerSection) {
  const auto r = decode("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET / HTTP/1.1\r\n");
  EXPECT_EQ(r.status, Status::done);
  EXPECT_EQ(r.data, "hello world");
  EXPECT_EQ(r.consumed, 26u);  // the pipelined request is not taken
}

TEST(Chunked, SameResultWhateverThePiecesAndOutputSize) {
  const std::string body = "a;x=1\r\n0123456789\r\n3;q=\"a\\\"b\"\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    for (const std::size_t out : {1u, 3u, 64u}) {
      const auto r = decode(body, piece, out);
      EXPECT_EQ(r.status, Status::done) << piece << " " << out;
      EXPECT_EQ(r.data, "0123456789abc") << piece << " " << out;
    }
  }
}

TEST(Chunked, UpperCaseHexLeadingZerosAndLastChunkZeros) {
  EXPECT_EQ(decode("00A\r\n0123456789\r\n000\r\n\r\n").data, "0123456789");
  EXPECT_EQ(decode("0000\r\n\r\n").status, Status::done);
}

// RFC 9112 §2.2, §7.1: every line of a chunked body ends in CRLF; a bare LF is refused at its
// byte, wherever it is, without waiting for more input.
TEST(Chunked, BareLfRefusedInEveryPosition) {
  EXPECT_EQ(violation_of("5\nhello\r\n0\r\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(violation_of("5\r\nhello\n0\r\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(violation_of("5\r\nhello\r\n0\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(violation_of("5\r\nhello\r\n0\r\n\n"), Violation::bare_lf);
  EXPECT_EQ(violation_of("5\r\nhello\r\n0\r\nA: b\n\r\n"), Violation::bare_lf);
  EXPECT_EQ(violation_of("5;a=b\n"), Violation::bare_lf);
  const auto r = decode("5\nhello");
  EXPECT_EQ(r.status, Status::invalid);
  EXPECT_EQ(r.consumed, 2u);  // the LF itself
}

TEST(Chunked, BareCrRefused) {
  EXPECT_EQ(violation_of("5\rhello"), Violation::bare_cr);
  EXPECT_EQ(violation_of("5\r\nhello\rX"), Violation::bare_cr);
  EXPECT_EQ(violation_of("0\r\n\rX"), Violation::bare_cr);
}

// RFC 9112 §7.1: chunk-data is followed by CRLF: a chunk longer than its size line says is
// refused at the first byte after the declared size.
TEST(Chunked, DataNotFollowedByCrlfRefusedAtThatByte) {
  const auto r = decode("5\r\nABCDE0\r\n");
  EXPECT_EQ(r.status, Status::invalid);
  EXPECT_EQ(r.violation, Violation::bad_chunk);
  EXPECT_EQ(r.consumed, 9u);
  EXPECT_EQ(violation_of("3\r\nhello\r\n"), Violation::bad_chunk);
}

TEST(Chunked, ShorterChunkWaitsThenFailsOnTheNextBytes) {
  // "5\r\nhel\r\n" is still 5 bytes of data ("hel\r\n") followed by whatever comes: need more.
  EXPECT_EQ(decode("5\r\nhel\r\n").status, Status::need_more);
  EXPECT_EQ(violation_of("5\r\nhel\r\n0\r\n\r\n"), Violation::bad_chunk);
}

TEST(Chunked, BadSizeLines) {
  EXPECT_EQ(violation_of("\r\n"), Violation::bad_chunk);        // empty
  EXPECT_EQ(violation_of("-1\r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of(" 5\r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("0x5\r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("5g\r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("fffffffffffffffff\r\n"), Violation::bad_chunk);  // 2^68: overflow
}

// RFC 9112 §7.1.1: chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ).
TEST(Chunked, ExtensionsFollowTheGrammar) {
  EXPECT_EQ(decode("1 ; a = b ;c;d=\"x y\"\r\nX\r\n0;e\r\n\r\n").status, Status::done);
  EXPECT_EQ(violation_of("1 \r\n"), Violation::bad_chunk);           // BWS only before ";"
  EXPECT_EQ(violation_of("1;a=b \r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("1;a \r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("1;\r\n"), Violation::bad_chunk);           // no name
  EXPECT_EQ(violation_of("1;a=\r\n"), Violation::bad_chunk);         // no value
  EXPECT_EQ(violation_of("1;a=b c\r\n"), Violation::bad_chunk);      // two tokens
  EXPECT_EQ(violation_of("1;a=\"x\r\nX\r\n"), Violation::bad_chunk);  // unbalanced quote
  EXPECT_EQ(violation_of("1;a=\"x\"y\r\n"), Violation::bad_chunk);
  EXPECT_EQ(violation_of("1;a=\"x\\\r\n"), Violation::bad_chunk);    // escaped CR
  EXPECT_EQ(violation_of("1;a\x01\r\n"), Violation::bad_chunk);
}

TEST(Chunked, SizeLineIsBounded) {
  ChunkedDecoder::Limits limits;
  limits.max_line = 16;
  EXPECT_EQ(decode("1;aaaaaaaaaaa\r\nX\r\n0\r\n\r\n", 0, 64, limits).status, Status::done);
  const auto r = decode("1;aaaaaaaaaaaaaaaaaaa", 0, 64, limits);
  EXPECT_EQ(r.violation, Violation::chunk_line_too_long);
  EXPECT_EQ(r.consumed, 17u);  // refused as soon as the line is longer, not at its end
  EXPECT_EQ(decode(std::string(100'000, '0'), 0, 64).violation, Violation::chunk_line_too_long);
}

// RFC 9112 §7.1.2: trailer-section = *( field-line CRLF ).
TEST(Chunked, TrailerFieldsAreChecked) {
  EXPECT_EQ(decode("0\r\nX-Sum: abc\r\nY:\r\n\r\n").status, Status::done);
  EXPECT_EQ(violation_of("0\r\n folded\r\n\r\n"), Violation::bad_trailer);
  EXPECT_EQ(violation_of("0\r\nX :a\r\n\r\n"), Violation::bad_trailer);
  EXPECT_EQ(violation_of("0\r\n:a\r\n\r\n"), Violation::bad_trailer);
  EXPECT_EQ(violation_of("0\r\nX: a\x01\r\n\r\n"), Violation::bad_trailer);
  EXPECT_EQ(violation_of("0\r\nnoColon\r\n\r\n"), Violation::bad_trailer);
}

// RFC 9110 §6.5.1: no framing or routing fields in a trailer.
TEST(Chunked, FramingFieldsInTrailerRefused) {
  for (const char* name : {"Content-Length", "transfer-encoding", "Transfer_Encoding",
                           "CONTENT_LENGTH", "Host", "Trailer"}) {
    EXPECT_EQ(violation_of(std::string("0\r\n") + name + ": 5\r\n\r\n"), Violation::bad_trailer)
        << name;
  }
  EXPECT_EQ(decode("0\r\nContent-Length-Sum: 5\r\n\r\n").status, Status::done);
  EXPECT_EQ(decode("0\r\nA-Name-Longer-Than-Twenty-Bytes: 5\r\n\r\n").status, Status::done);
}

TEST(Chunked, TrailerSectionIsBounded) {
  ChunkedDecoder::Limits limits;
  limits.max_trailer = 32;
  EXPECT_EQ(decode("0\r\nX: " + std::string(20, 'a') + "\r\n\r\n", 0, 64, limits).status,
            Status::done);
  EXPECT_EQ(decode("0\r\nX: " + std::string(100'000, 'a'), 0, 64, limits).violation,
            Violation::trailer_too_large);
}

TEST(Chunked, BoundaryOnlyAfterTheDataCrlf) {
  ChunkedDecoder d;
  char out[16];
  EXPECT_TRUE(d.at_boundary());
  d.feed("5\r\nhel", out);
  EXPECT_FALSE(d.at_boundary());
  d.feed("lo\r", out);
  EXPECT_FALSE(d.at_boundary());
  d.feed("\n", out);
  EXPECT_TRUE(d.at_boundary());
  d.feed("0\r\n", out);
  EXPECT_TRUE(d.at_boundary());
  EXPECT_FALSE(d.done());
  d.feed("\r\n", out);
  EXPECT_TRUE(d.done());
}

}  // namespace
