#include "sluice/http/chars.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace sluice::http::chars {
namespace {

// A run function against the table: for every byte value placed at every position of runs of
// each size, the run stops exactly at the first byte the table says is not of class `k`.
template <class Run>
void expect_stops_where_the_table_says(Run run, std::uint8_t k, std::initializer_list<std::size_t> sizes) {
  for (const std::size_t size : sizes) {
    for (std::size_t at = 0; at < size; ++at) {
      for (int c = 0; c < 256; ++c) {
        std::string bytes(size, 'a');
        bytes[at] = static_cast<char>(c);
        const std::size_t expected = is(static_cast<unsigned char>(c), k) ? size : at;
        ASSERT_EQ(run(bytes.data(), bytes.size()), expected) << "size " << size << " at " << at << " byte " << c;
      }
    }
    const std::string plain(size, 'x');
    EXPECT_EQ(run(plain.data(), plain.size()), size);
  }
}

// Runs long enough for field_run()'s 16-byte steps, their tail and the byte-by-byte end.
TEST(FieldRun, StopsWhereTheTableSaysForEveryByteAtEveryPosition) {
  expect_stops_where_the_table_says(field_run, k_field, {0, 1, 15, 16, 17, 31, 32, 33, 47, 64});
}

// Runs around token_run()'s four-byte steps.
TEST(TokenRun, StopsWhereTheTableSaysForEveryByteAtEveryPosition) {
  expect_stops_where_the_table_says(token_run, k_tchar, {0, 1, 3, 4, 5, 7, 8, 9, 14, 19});
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
