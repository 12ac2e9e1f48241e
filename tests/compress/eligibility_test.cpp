// Which responses are compressed and how their heads change (compress/eligibility.hpp), on real
// response heads indexed as the session indexes them.
#include "sluice/compress/eligibility.hpp"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "sluice/http/head_index.hpp"

namespace sluice::compress {
namespace {

struct IndexedResponse {
  std::string bytes;
  http::ResponseHead head;
};

// A response head: the status line, then `fields` ("Name: value\r\n" lines).
std::unique_ptr<IndexedResponse> response(std::string_view fields, unsigned status = 200) {
  auto r = std::make_unique<IndexedResponse>();
  r->bytes = "HTTP/1.1 " + std::to_string(status) + " X\r\n" + std::string(fields) + "\r\n";
  EXPECT_EQ(http::index_response_head(r->bytes, 64 * 1024, r->head).result,
            http::HeadScan::Result::complete)
      << r->bytes;
  return r;
}

constexpr std::string_view html_4k =
    "Content-Type: text/html; charset=utf-8\r\nContent-Length: 4096\r\n";
const RequestSide gzip_client{Coding::gzip, false, 11};

Plan plan_for(std::string_view fields, unsigned status = 200, const RequestSide& req = gzip_client,
              const Policy& policy = {}) {
  const auto r = response(fields, status);
  return plan(policy, r->head, req);
}

TEST(CompressEligibility, AnOrdinaryTextResponseIsCompressedWithVary) {
  const auto p = plan_for(html_4k);
  EXPECT_TRUE(p.compress());
  EXPECT_EQ(p.coding, Coding::gzip);
  EXPECT_EQ(p.skip, Skip::none);
  EXPECT_TRUE(p.vary);
  EXPECT_FALSE(p.weaken_etag);
}

TEST(CompressEligibility, StatusesWithoutABodyAreNot) {
  for (const unsigned status : {100u, 103u, 204u, 304u}) {
    const auto p =
        plan_for(status == 204 || status == 304 ? "Content-Type: text/html\r\n" : "", status);
    EXPECT_EQ(p.skip, Skip::status) << status;
    EXPECT_FALSE(p.vary) << status;
  }
  // Error pages and redirects with a body are text like any other.
  EXPECT_TRUE(plan_for(html_4k, 404).compress());
  EXPECT_TRUE(plan_for(html_4k, 503).compress());
}

TEST(CompressEligibility, RangesAreNot) {
  EXPECT_EQ(plan_for(std::string(html_4k) + "Content-Range: bytes 0-4095/9000\r\n", 206).skip,
            Skip::partial);
  EXPECT_EQ(plan_for(std::string(html_4k) + "Content-Range: bytes */9000\r\n", 200).skip,
            Skip::partial);
}

TEST(CompressEligibility, AnEncodedBodyIsNotEncodedAgain) {
  EXPECT_EQ(plan_for(std::string(html_4k) + "Content-Encoding: br\r\n").skip, Skip::encoded);
  EXPECT_EQ(plan_for(std::string(html_4k) + "content-encoding: identity\r\n").skip, Skip::encoded);
  // A transfer coding other than chunked: the body is coded already, hop by hop.
  EXPECT_EQ(plan_for("Content-Type: text/html\r\nTransfer-Encoding: gzip, chunked\r\n").skip,
            Skip::transfer_coding);
  EXPECT_TRUE(plan_for("Content-Type: text/html\r\nTransfer-Encoding: chunked\r\n").compress());
}

TEST(CompressEligibility, NoTransformInAnyCacheControlLineIsObeyed) {
  EXPECT_EQ(plan_for(std::string(html_4k) + "Cache-Control: public, No-Transform\r\n").skip,
            Skip::no_transform);
  EXPECT_EQ(plan_for(std::string(html_4k) +
                     "Cache-Control: max-age=60\r\ncache-control: no-transform\r\n")
                .skip,
            Skip::no_transform);
  EXPECT_TRUE(plan_for(std::string(html_4k) + "Cache-Control: no-cache, no-store\r\n").compress());
  EXPECT_TRUE(plan_for(std::string(html_4k) + "Cache-Control: x-no-transform\r\n").compress());
}

TEST(CompressEligibility, ABodyBelowMinBytesIsNotButOneOfUnknownLengthIs) {
  EXPECT_EQ(plan_for("Content-Type: text/html\r\nContent-Length: 1023\r\n").skip, Skip::small);
  EXPECT_TRUE(plan_for("Content-Type: text/html\r\nContent-Length: 1024\r\n").compress());
  EXPECT_TRUE(plan_for("Content-Type: text/html\r\nTransfer-Encoding: chunked\r\n").compress());
  EXPECT_TRUE(plan_for("Content-Type: text/html\r\n").compress());  // read to close
  Policy any_size;
  any_size.min_bytes = 0;
  EXPECT_TRUE(
      plan_for("Content-Type: text/html\r\nContent-Length: 0\r\n", 200, gzip_client, any_size)
          .compress());
}

TEST(CompressEligibility, OnlyListedTypesIgnoringParametersAndCase) {
  EXPECT_TRUE(plan_for("Content-Type: APPLICATION/JSON ; charset=utf-8\r\nContent-Length: 5000\r\n")
                  .compress());
  EXPECT_TRUE(plan_for("Content-Type: image/svg+xml\r\nContent-Length: 5000\r\n").compress());
  EXPECT_EQ(plan_for("Content-Type: image/png\r\nContent-Length: 5000\r\n").skip, Skip::type);
  EXPECT_EQ(plan_for("Content-Type: application/json-seq\r\nContent-Length: 5000\r\n").skip,
            Skip::type);
  EXPECT_EQ(plan_for("Content-Length: 5000\r\n").skip, Skip::type);  // no type: not guessed
  EXPECT_EQ(plan_for("Content-Type: \r\nContent-Length: 5000\r\n").skip, Skip::type);
  Policy text_only;
  text_only.types = {"text/*"};
  EXPECT_TRUE(plan_for("Content-Type: text/x-anything\r\nContent-Length: 5000\r\n", 200,
                       gzip_client, text_only)
                  .compress());
  EXPECT_EQ(plan_for("Content-Type: application/json\r\nContent-Length: 5000\r\n", 200, gzip_client,
                     text_only)
                .skip,
            Skip::type);
  EXPECT_EQ(plan_for("Content-Type: textual/html\r\nContent-Length: 5000\r\n", 200, gzip_client,
                     text_only)
                .skip,
            Skip::type);
}

TEST(CompressEligibility, RequestSideReasonsStillAddVary) {
  const auto head = plan_for(html_4k, 200, RequestSide{Coding::gzip, true, 11});
  EXPECT_EQ(head.skip, Skip::head_request);
  EXPECT_TRUE(head.vary);
  EXPECT_FALSE(head.compress());
  const auto old = plan_for(html_4k, 200, RequestSide{Coding::gzip, false, 10});
  EXPECT_EQ(old.skip, Skip::http10_client);
  EXPECT_TRUE(old.vary);
  const auto plain = plan_for(html_4k, 200, RequestSide{Coding::identity, false, 11});
  EXPECT_EQ(plain.skip, Skip::not_accepted);
  EXPECT_TRUE(plain.vary);  // a cache must not give this identity copy to a gzip client either
  EXPECT_FALSE(plain.compress());
}

TEST(CompressEligibility, VaryIsAddedOnlyWhenItDoesNotCoverAcceptEncodingAlready) {
  EXPECT_FALSE(plan_for(std::string(html_4k) + "Vary: Origin, accept-encoding\r\n").vary);
  EXPECT_FALSE(plan_for(std::string(html_4k) + "Vary: *\r\n").vary);
  EXPECT_FALSE(plan_for(std::string(html_4k) + "Vary: Origin\r\nVary: Accept-Encoding\r\n").vary);
  EXPECT_TRUE(plan_for(std::string(html_4k) + "Vary: Origin\r\n").vary);
  EXPECT_TRUE(plan_for(std::string(html_4k) + "Vary: Accept-Encodings\r\n").vary);
}

TEST(CompressEligibility, AStrongEtagIsWeakenedAndAWeakOneKept) {
  EXPECT_TRUE(plan_for(std::string(html_4k) + "ETag: \"abc\"\r\n").weaken_etag);
  EXPECT_FALSE(plan_for(std::string(html_4k) + "ETag: W/\"abc\"\r\n").weaken_etag);
  EXPECT_FALSE(plan_for(html_4k).weaken_etag);
  // Not compressed: the validator stays as the origin sent it.
  EXPECT_FALSE(plan_for(std::string(html_4k) + "ETag: \"abc\"\r\n", 200,
                        RequestSide{Coding::identity, false, 11})
                   .weaken_etag);
}

TEST(CompressEligibility, TheFactsOfAHeadInOnePass) {
  const auto r = response(
      "Content-Type: text/css\r\nContent-Length: 777\r\nETag: \"x\"\r\nETag: W/\"y\"\r\nVary: "
      "origin\r\n"
      "Cache-Control: no-transform\r\n",
      200);
  const auto f = facts_of(r->head);
  EXPECT_EQ(f.status, 200U);
  EXPECT_EQ(f.content_length, 777U);
  EXPECT_EQ(f.content_type, "text/css");
  EXPECT_TRUE(f.strong_etag);  // the first ETag line
  EXPECT_FALSE(f.vary_covers);
  EXPECT_TRUE(f.no_transform);
  EXPECT_FALSE(f.content_encoding);
  EXPECT_FALSE(f.content_range);
}

TEST(CompressEligibility, MediaRangesForTheConfig) {
  EXPECT_TRUE(valid_media_range("text/html"));
  EXPECT_TRUE(valid_media_range("text/*"));
  EXPECT_TRUE(valid_media_range("application/vnd.api+json"));
  for (const auto bad :
       {"", "text", "text/", "/html", "*/*", "text/ html", "text/html;q=1", "te xt/html", "a/b/c"})
    EXPECT_FALSE(valid_media_range(bad)) << bad;
  for (const auto t : default_types()) EXPECT_TRUE(valid_media_range(t)) << t;
  EXPECT_EQ(Policy{}.types.size(), default_types().size());
}

TEST(CompressEligibility, EverySkipHasAName) {
  for (int s = 0; s <= static_cast<int>(Skip::type); ++s)
    EXPECT_NE(describe(static_cast<Skip>(s)), "unknown") << s;
}

}  // namespace
}  // namespace sluice::compress
