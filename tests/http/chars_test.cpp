#include "sluice/http/chars.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice::http::chars {
namespace {

// field_run() against the table: for every byte value placed at every position of runs long
// enough for the 16-byte steps, their tail and the byte-by-byte end, the run stops exactly at
// the first byte the table says is not a field byte.
TEST(FieldRun, StopsWhereTheTableSaysForEveryByteAtEveryPosition) {
  for (const std::size_t size : {0u, 1u, 15u, 16u, 17u, 31u, 32u, 33u, 47u, 64u}) {
    for (std::size_t at = 0; at < size; ++at) {
      for (int c = 0; c < 256; ++c) {
        std::string bytes(size, 'a');
        bytes[at] = static_cast<char>(c);
        const std::size_t expected = is(static_cast<unsigned char>(c), k_field) ? size : at;
        ASSERT_EQ(field_run(bytes.data(), bytes.size()), expected) << "size " << size << " at " << at << " byte " << c;
      }
    }
    const std::string plain(size, 'x');
    EXPECT_EQ(field_run(plain.data(), plain.size()), size);
  }
}

// token_run() against the table, for every byte value at every position of runs around its
// four-byte steps.
TEST(TokenRun, StopsWhereTheTableSaysForEveryByteAtEveryPosition) {
  for (const std::size_t size : {0u, 1u, 3u, 4u, 5u, 7u, 8u, 9u, 14u, 19u}) {
    for (std::size_t at = 0; at < size; ++at) {
      for (int c = 0; c < 256; ++c) {
        std::string bytes(size, 'a');
        bytes[at] = static_cast<char>(c);
        const std::size_t expected = is(static_cast<unsigned char>(c), k_tchar) ? size : at;
        ASSERT_EQ(token_run(bytes.data(), bytes.size()), expected) << "size " << size << " at " << at << " byte " << c;
      }
    }
  }
  const std::string line = "Content-Length: 3";
  EXPECT_EQ(token_run(line.data(), line.size()), line.find(':'));
}

TEST(FieldRun, KeepsHtabSpaceAndObsTextAndStopsAtTheLineBreak) {
  const std::string value = "text/html;\tq=0.9, \x80\xff caf\xc3\xa9 and more than sixteen bytes\r\nNext: x";
  EXPECT_EQ(field_run(value.data(), value.size()), value.find('\r'));
  // Only n bytes are looked at: a run that ends at n ends there, whatever follows.
  EXPECT_EQ(field_run(value.data(), 20), 20u);
}

}  // namespace
}  // namespace sluice::http::chars
