#pragma once
// Whether a response may be compressed, and what its head then changes. Pure functions over a
// response head (one pass over its fields) and a few facts of the request; no allocation. Any
// thread.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/compress/coding.hpp"

namespace sluice::http {
class ResponseHead;
struct ResponseSplice;
}

namespace sluice::compress {

// What an upstream or route configures (`compress = { ... }`); the config fills it, once per
// snapshot.
struct Policy {
  // Media types compressed (lower case, no parameters; "text/*" covers a whole top-level type).
  // Default: default_types().
  std::vector<std::string> types;
  // A response whose Content-Length is below this is sent as it is: under ~1 KiB the saving is
  // less than one packet, while the coding's headers and the encoder's CPU are paid in full.
  // A response without a length (chunked, read to close) is compressed whatever its size.
  std::uint64_t min_bytes = 1024;
  Preference preference;
  Levels levels;

  Policy();
};

// Text formats that compress well and are not compressed already (Envoy's default list, plus
// the XML and JavaScript types it lacks). Images, video, archives and fonts (woff2 is brotli
// inside) are left out: compressing them again costs CPU for nothing.
std::span<const std::string_view> default_types() noexcept;
// A valid Policy::types entry: "type/subtype" or "type/*", tokens, any case (the config lowers
// it and names the bad entry).
bool valid_media_range(std::string_view range) noexcept;

// Why a response goes out uncompressed; `none` when it is compressed (or would be, for a client
// that accepts a coding: see Plan::vary).
enum class Skip : std::uint8_t {
  none,
  not_accepted,     // the client accepts no offered coding (Vary is still added)
  head_request,     // HEAD: no body (Vary is still added, as to the GET)
  http10_client,    // an HTTP/1.0 client cannot take a chunked body (nginx gzip_http_version 1.1)
  status,           // 1xx, 204, 304: no body
  partial,          // 206 or Content-Range: byte ranges are of the identity body
  encoded,          // the origin sent Content-Encoding already
  no_transform,     // Cache-Control: no-transform (RFC 9111 §5.2.2.6)
  transfer_coding,  // a transfer coding other than chunked ("gzip, chunked")
  small,            // Content-Length below min_bytes
  type,             // Content-Type absent or not in the policy's types
};
std::string_view describe(Skip s) noexcept;

// What the request contributes, taken when the request is routed.
struct RequestSide {
  Coding accepted = Coding::identity;  // negotiate(accept_encoding_of(req), policy.preference)
  bool head = false;                   // the method is HEAD
  unsigned client_version = 11;        // 10 or 11
};

// The decision for one response, and the edits of its head.
struct Plan {
  Coding coding = Coding::identity;  // identity: the body passes unchanged
  Skip skip = Skip::none;
  // Add "Vary: Accept-Encoding" (a line of its own, RFC 9110 §5.3): the response's body depends
  // on Accept-Encoding whenever the response itself qualifies, whether this client got a coding
  // or not — a cache must not hand the identity copy to everyone, nor the coded one. False when
  // Vary already says "*" or names Accept-Encoding.
  bool vary = false;
  // Only when coding != identity:
  //  - "Content-Encoding: <token(coding)>" is added;
  //  - Content-Length is dropped: the coded length is known only at the end, so the body goes
  //    chunked (the wiring writes "Transfer-Encoding: chunked"; HTTP/1.0 clients are skipped);
  //  - Accept-Ranges is dropped: ranges would be of the identity body, which this
  //    representation is not (nginx's gzip filter does the same);
  //  - a strong ETag is weakened ("W/" prepended): the bytes differ from the origin's, so a
  //    strong validator would be a lie (RFC 9110 §8.8.1), while a weak one still lets
  //    If-None-Match revalidate (nginx does this; Envoy too). weaken_etag says whether there is
  //    one to weaken.
  bool weaken_etag = false;
  bool compress() const noexcept { return coding != Coding::identity; }
};

// The facts of a response head that the decision reads, in one pass over its fields.
struct ResponseFacts {
  unsigned status = 200;
  std::optional<std::uint64_t> content_length;
  std::string_view content_type;  // the first line's value; empty when absent
  bool content_encoding = false;  // any Content-Encoding line
  bool content_range = false;
  bool no_transform = false;     // a Cache-Control directive, in any line
  bool transfer_coding = false;  // Transfer-Encoding names a coding besides chunked
  bool vary_covers = false;      // Vary names Accept-Encoding or is "*"
  bool strong_etag = false;      // the first ETag is not W/
};
ResponseFacts facts_of(const http::ResponseHead& res) noexcept;

Plan plan(const Policy& policy, const ResponseFacts& res, const RequestSide& req) noexcept;
inline Plan plan(const Policy& policy, const http::ResponseHead& res,
                 const RequestSide& req) noexcept {
  return plan(policy, facts_of(res), req);
}

// The edits `plan` makes to the response's head (see Plan), for the splice that writes it.
void edit_head(const Plan& plan, http::ResponseSplice& edits) noexcept;

}  // namespace sluice::compress
