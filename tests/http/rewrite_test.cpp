#include "oracle/beast_fields.hpp"
#include "sluice/http/rewrite.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/beast/http/fields.hpp>

#include "sluice/http/request_id.hpp"

namespace {

namespace bhttp = boost::beast::http;
using sluice::http::ForwardedFor;

using Lines = std::vector<std::pair<std::string, std::string>>;

sluice::http::Fields fields_of(const Lines& lines) {
  sluice::http::Fields fields;
  for (const auto& [name, value] : lines) fields.insert(name, value);
  return fields;
}

// All lines, in order, as (name, value).
Lines lines_of(const sluice::http::Fields& fields) {
  Lines out;
  for (const auto& line : fields) out.emplace_back(line.name_string(), line.value());
  return out;
}

// ---- hop-by-hop ------------------------------------------------------------------------------

TEST(RewriteHopByHop, RemovesTheStandardHopByHopFields) {
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "keep-alive"},
                           {"Keep-Alive", "timeout=5"},
                           {"Proxy-Connection", "keep-alive"},
                           {"TE", "trailers"},
                           {"Trailer", "X-Sum"},
                           {"Transfer-Encoding", "chunked"},
                           {"Upgrade", "websocket"},
                           {"Accept", "*/*"}});
  sluice::http::strip_hop_by_hop(fields);
  EXPECT_EQ(lines_of(fields), (Lines{{"Host", "a"}, {"Accept", "*/*"}}));
}

TEST(RewriteHopByHop, RemovesFieldsNamedByConnectionCaseInsensitively) {
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "X-Secret, x-other"},
                           {"x-secret", "1"},
                           {"X-OTHER", "2"},
                           {"X-Kept", "3"}});
  sluice::http::strip_hop_by_hop(fields);
  EXPECT_EQ(lines_of(fields), (Lines{{"Host", "a"}, {"X-Kept", "3"}}));
}

TEST(RewriteHopByHop, HonoursEveryConnectionLine) {
  auto fields = fields_of({{"Connection", "X-A"},
                           {"Host", "a"},
                           {"X-A", "1"},
                           {"connection", " , X-B ,"},
                           {"X-B", "2"},
                           {"X-C", "3"}});
  sluice::http::strip_hop_by_hop(fields);
  EXPECT_EQ(lines_of(fields), (Lines{{"Host", "a"}, {"X-C", "3"}}));
}

TEST(RewriteHopByHop, ConnectionCannotRemoveHostOrContentLength) {
  // Dropping Content-Length would desynchronise framing with the origin; dropping Host would
  // forward a request without the authority it was validated and routed with.
  auto fields = fields_of({{"Host", "a"},
                           {"Content-Length", "5"},
                           {"X-Request-Id", "id"},
                           {"Connection", "content-length, HOST, x-request-id, close"}});
  sluice::http::strip_hop_by_hop(fields);
  EXPECT_EQ(lines_of(fields),
            (Lines{{"Host", "a"}, {"Content-Length", "5"}, {"X-Request-Id", "id"}}));
}

TEST(RewriteHopByHop, LeavesOtherFieldsInOrder) {
  auto fields = fields_of({{"B", "1"}, {"Connection", "close"}, {"A", "2"}, {"C", "3"}});
  sluice::http::strip_hop_by_hop(fields);
  EXPECT_EQ(lines_of(fields), (Lines{{"B", "1"}, {"A", "2"}, {"C", "3"}}));
}

// ---- request ---------------------------------------------------------------------------------

const ForwardedFor k_info{"203.0.113.7", "https", "0f8e7c5a-3b1d-4c2e-9a6f-1e2d3c4b5a69"};

TEST(RewriteRequest, AddsForwardedFieldsAndRequestId) {
  auto fields = fields_of({{"Host", "shop.example"}, {"Accept", "*/*"}});
  sluice::http::rewrite_request(fields, k_info);
  EXPECT_EQ(fields["X-Forwarded-For"], "203.0.113.7");
  EXPECT_EQ(fields["X-Forwarded-Proto"], "https");
  EXPECT_EQ(fields["X-Forwarded-Host"], "shop.example");
  EXPECT_EQ(fields["X-Request-Id"], k_info.request_id);
  EXPECT_EQ(fields["Host"], "shop.example");
}

TEST(RewriteRequest, AppendsToExistingForwardedForLinesAsOneLine) {
  auto fields = fields_of({{"Host", "a"},
                           {"X-Forwarded-For", "198.51.100.1"},
                           {"Accept", "*/*"},
                           {"x-forwarded-for", "198.51.100.2, 198.51.100.3"}});
  sluice::http::rewrite_request(fields, k_info);
  EXPECT_EQ(fields.count("X-Forwarded-For"), 1U);
  EXPECT_EQ(fields["X-Forwarded-For"], "198.51.100.1, 198.51.100.2, 198.51.100.3, 203.0.113.7");
}

TEST(RewriteRequest, EmptyForwardedForLinesAreSkipped) {
  auto fields =
      fields_of({{"Host", "a"}, {"X-Forwarded-For", ""}, {"X-Forwarded-For", "10.0.0.1"}});
  sluice::http::rewrite_request(fields, k_info);
  EXPECT_EQ(fields["X-Forwarded-For"], "10.0.0.1, 203.0.113.7");
}

TEST(RewriteRequest, ReplacesClientClaimsAboutProtoHostAndId) {
  auto fields = fields_of({{"Host", "real.example"},
                           {"X-Forwarded-Proto", "https"},
                           {"X-Forwarded-Proto", "http"},
                           {"X-Forwarded-Host", "spoofed.example"},
                           {"X-Request-Id", "client-id"}});
  sluice::http::rewrite_request(fields, {"192.0.2.1", "http", "our-id"});
  EXPECT_EQ(fields.count("X-Forwarded-Proto"), 1U);
  EXPECT_EQ(fields["X-Forwarded-Proto"], "http");
  EXPECT_EQ(fields.count("X-Forwarded-Host"), 1U);
  EXPECT_EQ(fields["X-Forwarded-Host"], "real.example");
  EXPECT_EQ(fields.count("X-Request-Id"), 1U);
  EXPECT_EQ(fields["X-Request-Id"], "our-id");
}

TEST(RewriteRequest, WithoutHostAClientForwardedHostIsDropped) {
  auto fields = fields_of({{"X-Forwarded-Host", "spoofed.example"}});
  sluice::http::rewrite_request(fields, k_info);
  EXPECT_EQ(fields.count("X-Forwarded-Host"), 0U);
  EXPECT_EQ(fields.count("Host"), 0U);
}

TEST(RewriteRequest, StripsHopByHopBeforeForwarding) {
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "X-Forwarded-For, Upgrade"},
                           {"X-Forwarded-For", "6.6.6.6"},
                           {"Upgrade", "websocket"},
                           {"Transfer-Encoding", "chunked"}});
  sluice::http::rewrite_request(fields, k_info);
  EXPECT_EQ(fields.count("Connection"), 0U);
  EXPECT_EQ(fields.count("Upgrade"), 0U);
  EXPECT_EQ(fields.count("Transfer-Encoding"), 0U);
  // The client asked to drop its own X-Forwarded-For: it may, our hop is still recorded.
  EXPECT_EQ(fields["X-Forwarded-For"], "203.0.113.7");
}

TEST(RewriteRequest, ClientRequestIdSurvivesConnectionAndItsOwnReplacement) {
  // choose_request_id() hands out a view into the client's X-Request-Id line; rewrite_request()
  // must neither let "Connection: X-Request-Id" free it nor read it after replacing it.
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "X-Request-Id"},
                           {"X-Request-Id", "client-chosen-id-0123456789"}});
  sluice::http::RequestIdGenerator gen{1};
  char storage[37];
  const auto id = sluice::http::choose_request_id(fields, gen, storage);
  ASSERT_EQ(id, "client-chosen-id-0123456789");
  sluice::http::rewrite_request(fields, {"192.0.2.1", "http", id});
  EXPECT_EQ(fields["X-Request-Id"], "client-chosen-id-0123456789");
}

// ---- response --------------------------------------------------------------------------------

TEST(RewriteResponse, StripsHopByHopAndEchoesTheRequestId) {
  auto fields = fields_of({{"Content-Type", "text/plain"},
                           {"Connection", "close, X-Internal"},
                           {"X-Internal", "debug"},
                           {"Keep-Alive", "timeout=5"},
                           {"Transfer-Encoding", "chunked"},
                           {"X-Request-Id", "origin-id"}});
  sluice::http::rewrite_response(fields, "our-id");
  EXPECT_EQ(lines_of(fields), (Lines{{"Content-Type", "text/plain"}, {"X-Request-Id", "our-id"}}));
}

// RFC 9112 §6.1: the body is relayed unchanged, so the codings that describe it stay.
TEST(RewriteResponse, KeepsCodingsBeforeChunked) {
  auto fields = fields_of({{"Transfer-Encoding", "gzip, chunked"}, {"Connection", "close"}});
  sluice::http::rewrite_response(fields, "id");
  EXPECT_EQ(lines_of(fields),
            (Lines{{"Transfer-Encoding", "gzip, chunked"}, {"X-Request-Id", "id"}}));
}

TEST(RewriteResponse, OriginsCannotSpeakAsSluice) {
  auto fields = fields_of({{"Sluice-Error", "no route"}, {"sluice-attempts", "3"},
                           {"Sluicer", "ok"}, {"Content-Length", "2"}});
  sluice::http::strip_origin_claims(fields, 200);
  EXPECT_EQ(lines_of(fields), (Lines{{"Sluicer", "ok"}, {"Content-Length", "2"}}));
}

// RFC 9110 §8.6, §15.2, §15.3.5, §15.4.5: no framing fields on 1xx, 204 and 304.
TEST(RewriteResponse, NoFramingFieldsWithoutContent) {
  for (const unsigned status : {103u, 204u, 304u}) {
    auto fields = fields_of({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"},
                             {"ETag", "\"x\""}});
    sluice::http::strip_origin_claims(fields, status);
    EXPECT_EQ(lines_of(fields), (Lines{{"ETag", "\"x\""}})) << status;
  }
}

// ---- request id choice -----------------------------------------------------------------------

TEST(RewriteRequestId, KeepsASaneClientId) {
  sluice::http::RequestIdGenerator gen{1};
  char storage[37];
  const auto fields = fields_of({{"x-request-id", "abc-123_~!"}});
  EXPECT_EQ(sluice::http::choose_request_id(fields, gen, storage), "abc-123_~!");
  const std::string longest(128, 'z');
  const auto long_fields = fields_of({{"X-Request-Id", longest}});
  EXPECT_EQ(sluice::http::choose_request_id(long_fields, gen, storage), longest);
}

TEST(RewriteRequestId, GeneratesOneWhenTheClientIdIsMissingOrInsane) {
  const std::vector<Lines> cases = {
      {},
      {{"X-Request-Id", ""}},
      {{"X-Request-Id", std::string(129, 'z')}},
      {{"X-Request-Id", "has space"}},
      {{"X-Request-Id", "tab\there"}},
      {{"X-Request-Id", "caf\xc3\xa9"}},
      {{"X-Request-Id", "one"}, {"X-Request-Id", "two"}},
  };
  for (const auto& lines : cases) {
    sluice::http::RequestIdGenerator gen{5};
    sluice::http::RequestIdGenerator reference{5};
    char storage[37];
    char expected[37];
    const auto fields = fields_of(lines);
    const auto id = sluice::http::choose_request_id(fields, gen, storage);
    EXPECT_EQ(id, reference.next(expected)) << (lines.empty() ? "(none)" : lines[0].second);
    EXPECT_EQ(id.data(), storage);
  }
}

}  // namespace
