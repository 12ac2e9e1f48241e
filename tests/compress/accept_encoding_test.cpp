// Accept-Encoding (RFC 9110 §12.5.3) and the choice of a coding (compress/accept_encoding.hpp).
#include "sluice/compress/accept_encoding.hpp"

#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "sluice/http/head_index.hpp"

namespace sluice::compress {
namespace {

AcceptEncoding parsed(std::initializer_list<std::string_view> lines) {
  AcceptEncoding a;
  for (const auto line : lines) a.add(line);
  return a;
}

// The coding chosen with the default preference (zstd, br, gzip).
Coding chosen(std::initializer_list<std::string_view> lines, const Preference& pref = {}) {
  return negotiate(parsed(lines), pref);
}

const Preference gzip_only{std::array<Coding, 1>{Coding::gzip}};
const Preference gzip_then_br{std::array<Coding, 2>{Coding::gzip, Coding::br}};

TEST(AcceptEncoding, ABrowsersListWithoutWeightsGetsTheServersFirstChoice) {
  EXPECT_EQ(chosen({"gzip, deflate, br, zstd"}), Coding::zstd);
  EXPECT_EQ(chosen({"gzip, deflate, br"}), Coding::br);
  EXPECT_EQ(chosen({"gzip, deflate"}), Coding::gzip);
  EXPECT_EQ(chosen({"gzip, deflate, br, zstd"}, gzip_then_br), Coding::gzip);
  EXPECT_EQ(chosen({"br"}, gzip_only), Coding::identity);
}

TEST(AcceptEncoding, TheClientsHighestWeightWinsAndTiesGoToTheServersOrder) {
  EXPECT_EQ(chosen({"gzip;q=1.0, br;q=0.8, zstd;q=0.5"}), Coding::gzip);
  EXPECT_EQ(chosen({"gzip;q=0.5, br;q=0.5, zstd;q=0.4"}), Coding::br);
  EXPECT_EQ(chosen({"gzip;q=0.501, br;q=0.5"}), Coding::gzip);
  EXPECT_EQ(chosen({"gzip;q=0.5, br;q=0.5"}, gzip_then_br), Coding::gzip);
}

TEST(AcceptEncoding, QZeroRefusesACoding) {
  EXPECT_EQ(chosen({"zstd;q=0, br;q=0, gzip"}), Coding::gzip);
  EXPECT_EQ(chosen({"gzip;q=0"}), Coding::identity);
  EXPECT_EQ(chosen({"gzip;q=0.000"}), Coding::identity);
  EXPECT_EQ(chosen({"gzip;q=0.001"}), Coding::gzip);
}

TEST(AcceptEncoding, StarCoversEveryCodingNotListed) {
  EXPECT_EQ(chosen({"*"}), Coding::zstd);
  EXPECT_EQ(chosen({"*;q=0.5, zstd;q=0"}), Coding::br);
  EXPECT_EQ(chosen({"*;q=0.2, gzip;q=0.3"}), Coding::gzip);
  EXPECT_EQ(chosen({"*;q=0"}), Coding::identity);
  EXPECT_EQ(chosen({"*;q=0, gzip"}), Coding::gzip);
}

TEST(AcceptEncoding, IdentityListedAboveEveryCodingIsKept) {
  EXPECT_EQ(chosen({"identity, gzip;q=0.5"}), Coding::identity);
  EXPECT_EQ(chosen({"identity;q=0.5, gzip;q=0.5"}), Coding::gzip);  // a tie: the server compresses
  // Unlisted, identity is only acceptable, not preferred.
  EXPECT_EQ(chosen({"gzip;q=0.1"}), Coding::gzip);
}

TEST(AcceptEncoding, IdentityRefusalFollowsTheRfc) {
  EXPECT_EQ(parsed({"gzip"}).weight(Coding::identity), 1000);
  EXPECT_EQ(parsed({"identity;q=0"}).weight(Coding::identity), 0);
  EXPECT_EQ(parsed({"*;q=0"}).weight(Coding::identity), 0);
  EXPECT_EQ(parsed({"*;q=0, identity;q=0.1"}).weight(Coding::identity), 100);
  // Nothing acceptable at all: answered unchanged (no 406), as nginx and Envoy do.
  EXPECT_EQ(chosen({"identity;q=0"}), Coding::identity);
  EXPECT_EQ(chosen({"identity;q=0, gzip"}), Coding::gzip);
}

TEST(AcceptEncoding, NoHeaderOrAnEmptyOneMeansIdentity) {
  EXPECT_EQ(chosen({}), Coding::identity);
  EXPECT_FALSE(parsed({}).present());
  EXPECT_EQ(chosen({""}), Coding::identity);
  EXPECT_TRUE(parsed({""}).present());
  EXPECT_EQ(chosen({" ,  , "}), Coding::identity);
}

TEST(AcceptEncoding, CodingsAreCaseInsensitiveAndWhitespaceIsTolerated) {
  EXPECT_EQ(chosen({"GZIP"}), Coding::gzip);
  EXPECT_EQ(chosen({"  Br ;  Q=0.9 ,\tgzip ; q=0.8 "}), Coding::br);
  EXPECT_EQ(chosen({"X-GZIP"}), Coding::gzip);  // RFC 9110 §8.4.1.3
  EXPECT_EQ(chosen({",,gzip,,"}), Coding::gzip);
}

TEST(AcceptEncoding, SeveralLinesAreOneList) {
  EXPECT_EQ(chosen({"gzip", "br"}), Coding::br);
  EXPECT_EQ(chosen({"br;q=0.1", "gzip"}), Coding::gzip);
}

TEST(AcceptEncoding, ACodingListedTwiceKeepsItsLowestWeight) {
  EXPECT_EQ(chosen({"zstd, zstd;q=0"}), Coding::identity);
  EXPECT_EQ(chosen({"zstd;q=0", "zstd"}), Coding::identity);
  EXPECT_EQ(parsed({"gzip;q=0.9, gzip;q=0.3"}).listed(Coding::gzip), 300);
}

TEST(AcceptEncoding, AMalformedElementIsIgnoredAndTheRestCounts) {
  // Weights outside the qvalue grammar.
  for (const auto bad :
       {"zstd;q=2", "zstd;q=1.5", "zstd;q=1.0001", "zstd;q=0.1234", "zstd;q=x",
        "zstd;q=", "zstd;q=-1", "zstd;q=.5", "zstd;q=\"0.5\"", "zstd;q", "zstd;;q=1", "zstd q=1"}) {
    EXPECT_EQ(chosen({std::string(bad) + ", gzip"}), Coding::gzip) << bad;
    EXPECT_EQ(parsed({bad}).listed(Coding::zstd), AcceptEncoding::unlisted) << bad;
  }
  // Bytes that are no token.
  EXPECT_EQ(chosen({"\"zstd\", gzip"}), Coding::gzip);
  EXPECT_EQ(chosen({"zst\x80"
                    "d, gzip"}),
            Coding::gzip);
  EXPECT_EQ(chosen({"zstd\x01, gzip"}), Coding::gzip);
  EXPECT_EQ(chosen({"zstd/1, br"}), Coding::br);
  // Unknown parameters are fine, even quoted with a comma inside.
  EXPECT_EQ(chosen({"zstd;level=3;q=0.5, gzip;q=0.4"}), Coding::zstd);
  EXPECT_EQ(chosen({"zstd;x=\"a,b\";q=0.5, gzip;q=0.4"}), Coding::zstd);
  EXPECT_EQ(chosen({"zstd;x=\"a,b, gzip"}), Coding::identity);  // an unclosed quote eats the line
  // Unknown codings are ignored.
  EXPECT_EQ(chosen({"compress, deflate, exi"}), Coding::identity);
  EXPECT_EQ(chosen({"1.0"}), Coding::identity);
}

TEST(AcceptEncoding, QvaluesReadToTheThousandth) {
  EXPECT_EQ(parsed({"gzip;q=0.5"}).listed(Coding::gzip), 500);
  EXPECT_EQ(parsed({"gzip;q=0.05"}).listed(Coding::gzip), 50);
  EXPECT_EQ(parsed({"gzip;q=0.123"}).listed(Coding::gzip), 123);
  EXPECT_EQ(parsed({"gzip;q=1.000"}).listed(Coding::gzip), 1000);
  EXPECT_EQ(parsed({"gzip;q=1."}).listed(Coding::gzip), 1000);
  EXPECT_EQ(parsed({"gzip;q=0"}).listed(Coding::gzip), 0);
}

TEST(AcceptEncoding, ReadsEveryLineOfARequestHead) {
  const std::string bytes =
      "GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip;q=0.5\r\nX-Other: br\r\n"
      "accept-encoding: br;q=0.9\r\n\r\n";
  http::RequestHead head;
  ASSERT_EQ(http::index_request_head(bytes, {}, head).result, http::HeadScan::Result::complete);
  const auto accept = accept_encoding_of(head);
  EXPECT_TRUE(accept.present());
  EXPECT_EQ(accept.listed(Coding::gzip), 500);
  EXPECT_EQ(accept.listed(Coding::br), 900);
  EXPECT_EQ(negotiate(accept, {}), Coding::br);
}

TEST(Preference, KeepsTheGivenOrderWithoutIdentityOrRepeats) {
  const Preference p{
      std::array<Coding, 5>{Coding::br, Coding::identity, Coding::br, Coding::gzip, Coding::zstd}};
  ASSERT_EQ(p.order().size(), 3U);
  EXPECT_EQ(p.order()[0], Coding::br);
  EXPECT_EQ(p.order()[1], Coding::gzip);
  EXPECT_EQ(p.order()[2], Coding::zstd);
  EXPECT_EQ(Preference{}.order()[0], Coding::zstd);
}

}  // namespace
}  // namespace sluice::compress
