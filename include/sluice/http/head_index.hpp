#pragma once
// A message head parsed once into a flat index over its own bytes: one pass of the strict
// scanner (head_scanner.hpp) fills a fixed array of (known-field enum, name span, value span) and
// the framing facts, applying in that pass every rule a head must pass: the byte rules of
// scan_*_head() (strict.hpp), the Connection and framing rules (head_index.cpp), the Host rules,
// and a request's admission. No beast::http::fields, no allocation: the index is ~2 KiB of plain
// data and refers to the head by offsets, so the bytes must stay where they are while it is used
// (or the index be rebased onto the bytes' new place with rebase()).
//
// The heads sent on are the received bytes with the edits spliced in (splice_request_head,
// splice_response_head): the fields that stay are copied as runs of lines, not rebuilt one by one.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>

#include "sluice/http/edge_rules.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

// The fields the proxy itself reads or edits; every other name is `unknown` (and still indexed).
enum class KnownField : std::uint8_t {
  unknown,
  host,
  content_length,
  transfer_encoding,
  connection,
  keep_alive,
  proxy_connection,
  upgrade,
  expect,
  te,
  trailer,
  http2_settings,
  proxy_authorization,
  proxy_authenticate,
  x_forwarded_for,
  x_forwarded_proto,
  x_forwarded_host,
  x_request_id,
  forwarded,
  idempotency_key,
  cookie,
  date,  // a forwarded answer without one gets sluice's (RFC 9110 §6.6.1)
  sluice,  // any Sluice-* name: only sluice speaks as sluice
  count_,
};

// Case-insensitive; "Sluice-Error" and every other "sluice-" name is KnownField::sluice.
KnownField classify_field(std::string_view name) noexcept;
// RFC 9110 §7.6.1: Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
// Upgrade, HTTP2-Settings.
bool is_hop_by_hop(KnownField f) noexcept;

// No default member initializers: a HeadIndex is made once per exchange (the session's response
// index, in its arena), and initializing 101 unused entries cost ~300 instructions per request.
// Only fields()[0, size) is ever read, and each entry is written whole when its line is indexed.
struct IndexedField {
  std::uint32_t name_at;
  std::uint32_t value_at;    // OWS trimmed (RFC 9110 §5.5: not part of the value)
  std::uint32_t value_size;
  std::uint32_t name_size;   // max_header_bytes goes up to 1 MiB: so may a name
  KnownField known;
  bool hop_by_hop;           // listed above, or named by a Connection option (RFC 9110 §7.6.1)
};

class HeadIndex {
public:
  // HAProxy's default (tune.http.maxhdr 101). A request with more field lines is refused 431, a
  // response with more is a bad response (502): docs/http.md.
  static constexpr std::size_t capacity = 101;

  std::string_view bytes() const noexcept { return bytes_; }
  std::span<const IndexedField> fields() const noexcept { return {fields_.data(), size_}; }
  std::string_view name(const IndexedField& f) const noexcept { return bytes_.substr(f.name_at, f.name_size); }
  std::string_view value(const IndexedField& f) const noexcept { return bytes_.substr(f.value_at, f.value_size); }

  // O(1) for a known field; a scan of the array for any other name (case-insensitive).
  const IndexedField* find(KnownField k) const noexcept;
  const IndexedField* find(std::string_view name) const noexcept;
  std::size_t count(KnownField k) const noexcept { return count_[static_cast<std::size_t>(k)]; }
  std::size_t count(std::string_view name) const noexcept;
  // count(name) for a name classified beforehand (`known` = classify_field(name)): a name that
  // is configured once is not classified again for every request.
  std::size_t count(std::string_view name, KnownField known) const noexcept;
  // The first line's value, empty when absent.
  std::string_view value(KnownField k) const noexcept;
  std::string_view value(std::string_view name) const noexcept;
  // Calls f(const IndexedField&) for every line of `k`, in arrival order.
  template <class F>
  void for_each(KnownField k, F&& f) const {
    if (count(k) == 0) return;
    for (std::size_t i = first_[static_cast<std::size_t>(k)]; i < size_; ++i)
      if (fields_[i].known == k) f(fields_[i]);
  }

  unsigned version() const noexcept { return version_; }  // 10 or 11
  std::size_t byte_size() const noexcept { return bytes_.size(); }  // the head as received
  std::optional<std::uint64_t> content_length() const noexcept { return content_length_; }
  bool chunked() const noexcept { return chunked_; }  // Transfer-Encoding's final coding is chunked
  // Connection and Proxy-Connection options (Proxy-Connection is not standard, but clients still
  // send it meaning Connection): its close and keep-alive count, its upgrade does not.
  bool connection_close() const noexcept { return close_; }
  bool connection_keep_alive() const noexcept { return keep_alive_option_; }
  bool connection_upgrade() const noexcept { return upgrade_option_; }  // Connection only

  // The same head at another address (the buffer moved); offsets are unchanged.
  void rebase(std::string_view bytes) noexcept { bytes_ = bytes; }

protected:
  friend struct IndexBuilder;
  friend struct IndexFinisher;
  std::string_view bytes_;
  std::array<IndexedField, capacity> fields_;
  std::size_t size_ = 0;
  std::array<std::uint8_t, static_cast<std::size_t>(KnownField::count_)> first_{};
  std::array<std::uint8_t, static_cast<std::size_t>(KnownField::count_)> count_{};
  std::optional<std::uint64_t> content_length_;
  unsigned version_ = 11;
  bool chunked_ = false;
  bool close_ = false;
  bool keep_alive_option_ = false;
  bool upgrade_option_ = false;
};

class RequestHead : public HeadIndex {
public:
  std::string_view method() const noexcept { return bytes_.substr(method_at_, method_size_); }
  boost::beast::http::verb verb() const noexcept { return verb_; }
  std::string_view target() const noexcept { return bytes_.substr(target_at_, target_size_); }
  // The request line's bytes with its CRLF: the head's first (the index starts at the method).
  std::size_t request_line_size() const noexcept { return std::size_t{target_at_} + target_size_ + 11; }
  // The authority requests are routed by: Host, or an absolute-form target's authority (RFC 9112
  // §3.2.2); has_host() is false for an HTTP/1.0 request without either.
  std::string_view host() const noexcept { return bytes_.substr(host_at_, host_size_); }
  bool has_host() const noexcept { return has_host_; }
  bool host_from_target() const noexcept { return host_from_target_; }
  // The client connection may persist after this request (RFC 9112 §9.3: HTTP/1.1 unless
  // Connection: close, HTTP/1.0 only with keep-alive); the request has no body to read.
  bool keep_alive() const noexcept { return version_ == 11 ? !close_ : keep_alive_option_; }
  bool body_done() const noexcept { return !chunked_ && content_length_.value_or(0) == 0; }

private:
  friend struct IndexBuilder;
  friend struct IndexFinisher;
  std::uint32_t method_at_ = 0, method_size_ = 0, target_at_ = 0, target_size_ = 0;
  std::uint32_t host_at_ = 0, host_size_ = 0;
  boost::beast::http::verb verb_ = boost::beast::http::verb::unknown;
  bool has_host_ = false;
  bool host_from_target_ = false;
};

class ResponseHead : public HeadIndex {
public:
  unsigned status() const noexcept { return status_; }
  std::string_view reason() const noexcept { return bytes_.substr(reason_at_, reason_size_); }
  // The status line's bytes with its CRLF: the head's first.
  std::size_t status_line_size() const noexcept { return std::size_t{reason_at_} + reason_size_ + 2; }
  // The origin connection may persist after this response (RFC 9112 §9.3): not when its body
  // ends with the close; else as for a request (`is_head`: the request was HEAD, no body).
  bool keep_alive(bool is_head) const noexcept;

private:
  friend struct IndexBuilder;
  friend struct IndexFinisher;
  unsigned status_ = 0;
  std::uint32_t reason_at_ = 0, reason_size_ = 0;
};

struct RequestLimits {
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_uri_bytes = 8 * 1024;
  std::uint64_t max_body_bytes = 0;  // 0: unlimited
};

// The verdict on the bytes buffered so far. `bytes` may start with the empty lines RFC 9112 §2.2
// lets a client send before a request (they are part of head_start); the index covers
// bytes[0, head_size). Invalid: answer rejection.status with rejection.reason: a byte rule of
// the scan, a Connection, framing or Host rule, 431 "header too large" above capacity, or
// admission.
struct HeadVerdict {
  HeadScan::Result result = HeadScan::Result::need_more;
  std::size_t head_start = 0;
  std::size_t head_size = 0;  // complete: up to and including the final CRLFCRLF
  Rejection rejection;
  // The head parsed and is indexed; the refusal is admission's (413 for a declared body over
  // max_body_bytes, 501 for CONNECT, 400 for a bad absolute-form target), which the session
  // answers as a request (with its id, logged).
  bool admission = false;
};
HeadVerdict index_request_head(std::string_view bytes, const RequestLimits& limits,
                               RequestHead& out) noexcept;
// A response: invalid (502 bad response) on a byte rule of the scan, a Connection or framing
// rule, or above capacity.
HeadVerdict index_response_head(std::string_view bytes, std::size_t max_header_bytes,
                                ResponseHead& out) noexcept;

// The X-Request-Id to use: the client's own when it sent exactly one and it is sane
// (sane_request_id()), else a fresh one from `gen` written into `storage`.
class RequestIdGenerator;
std::string_view choose_request_id(const RequestHead& req, RequestIdGenerator& gen, char (&storage)[37]);
// The request's protocol switch is forwarded (RFC 9110 §7.8): an HTTP/1.1 GET without a body
// (`has_body`) whose Connection lists "upgrade" and whose Upgrade names a protocol other than h2c.
bool wants_upgrade(const RequestHead& req, bool has_body) noexcept;
// A 101 is accepted when its Upgrade names protocols and only ones the request offered (RFC 9110
// §7.8: a server must not switch to a protocol the client did not ask for).
bool valid_switch(const ResponseHead& res, const RequestHead& req) noexcept;
// How this final response is relayed to the client (ResponsePlan, RFC 9112 §6.3).
ResponsePlan plan_response(const ResponseHead& res, bool is_head, unsigned client_version,
                           bool client_keep_alive) noexcept;

// The request towards the origin, HTTP/1.1 (an empty Host when an HTTP/1.0 request came without
// one, RFC 9110 §7.2), its lines spliced with the edits: X-Forwarded-For, -Proto, -Host,
// X-Request-Id, Forwarded with `forwarded`, the framing line. Drops the
// hop-by-hop fields (and those a Connection option names), Expect (answered hop by hop), the
// client's X-Forwarded-Proto/-Host and X-Request-Id (and X-Forwarded-For, Forwarded, which are
// re-sent extended); writes an absolute-form target's authority as Host.
struct RequestSplice {
  ForwardedFor forwarded;
  bool chunked = false;                // the body is relayed chunked: add the framing line
  const PathRewrite* path = nullptr;   // nullptr: the target as received
  const HeaderRules* rules = nullptr;  // with vars
  const Variables* vars = nullptr;
  // A chunked body kept whole and sent with a length instead (DownstreamSession::keep_chunked_body): the
  // Content-Length line to write.
  std::optional<std::uint64_t> content_length;
};
void splice_request_head(std::string& out, const RequestHead& req, const RequestSplice& edits);

// A response head towards the client, spliced. Every kind drops the hop-by-hop fields (and those
// a Connection option names). `final_head` (DownstreamSession::send_response) and `interim` (a
// 1xx other than 101 to an HTTP/1.1 client) also drop what an origin may not pass on through us
// (Sluice-*, and Content-Length / Transfer-Encoding on a 1xx, 204 or 304); a final head gets our
// X-Request-Id, the framing towards the client, Sluice-Attempts and Connection as `plan` says.
// `switching` (a 101 after an upgrade, DownstreamSession::tunnel): our X-Request-Id, its Upgrade
// and "Connection: upgrade", and the fields as they are otherwise.
struct ResponseSplice {
  enum class Kind : std::uint8_t { final_head, interim, switching };
  std::string_view request_id;
  ResponsePlan plan;                   // final_head only
  unsigned client_version = 11;        // final_head only
  unsigned attempts = 1;               // final_head only: > 1 adds Sluice-Attempts
  Kind kind = Kind::final_head;
  const HeaderRules* rules = nullptr;  // final_head only, with vars
  const Variables* vars = nullptr;
  // An IMF-fixdate (http/date.hpp) written as Date when the origin sent none (final and
  // switching heads, RFC 9110 §6.6.1); empty: none added.
  std::string_view date{};
  // A content coding the proxy applies to the body (its compression; final_head only): the head
  // edits it needs, as plain facts, so that http knows nothing of the coding itself.
  std::string_view content_encoding{};  // "Content-Encoding: <value>" added; "" = none
  bool drop_length = false;             // Content-Length dropped: the coded length is unknown
  bool drop_accept_ranges = false;      // ranges would be of the uncoded body
  bool weaken_etag = false;             // the first ETag, when strong, gets "W/"
  bool add_vary = false;                // "Vary: Accept-Encoding" added as a line of its own
};
void splice_response_head(std::string& out, const ResponseHead& res, const ResponseSplice& edits);

}  // namespace sluice::http
