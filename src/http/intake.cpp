#include "sluice/http/intake.hpp"

namespace sluice::http {

HeadStep next_head(std::string_view buffered, std::size_t max_header_bytes,
                   std::size_t max_uri_bytes) noexcept {
  HeadStep step;
  step.skipped = empty_lines_before(buffered);
  step.scan = scan_request_head(buffered.substr(step.skipped), max_header_bytes, max_uri_bytes);
  return step;
}

std::size_t empty_lines_before(std::string_view buffered) noexcept {
  std::size_t n = 0;
  while (buffered.size() - n >= 2 && buffered.substr(n, 2) == "\r\n") n += 2;
  return n;
}

ChunkedFeed feed_chunked(ChunkedDecoder& decoder, std::string_view buffered, std::span<char> relay,
                         std::size_t& have, std::uint64_t& bytes_in, std::uint64_t max_body_bytes,
                         bool flush) noexcept {
  using Outcome = ChunkedFeed::Outcome;
  const auto s = decoder.feed(buffered, relay.subspan(have));
  have += s.produced;
  bytes_in += s.produced;
  ChunkedFeed f{Outcome::more, s.consumed, s.violation};
  if (s.status == ChunkedDecoder::Status::invalid) {
    f.outcome = Outcome::invalid;
  } else if (max_body_bytes != 0 && bytes_in > max_body_bytes) {
    f.outcome = Outcome::too_large;
  } else if (s.status == ChunkedDecoder::Status::done) {
    f.outcome = Outcome::done;
  } else if (have == relay.size() ||
             (flush && have > 0 && s.consumed == buffered.size() && decoder.at_boundary())) {
    f.outcome = Outcome::some;
  }
  return f;
}

}  // namespace sluice::http
