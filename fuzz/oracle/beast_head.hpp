#pragma once
// The test oracle: a second reading of a request or response head, through Beast's parser and
// fields, that the fuzz targets (fuzz/targets/) and the unit tests compare the head index
// (sluice/http/head_index.hpp) against. Beast's parser + check_*_fields() decide what parses;
// the writers below produce the head sluice forwards, from Beast's fields. None of it is in the
// sluice binary: the library is built for the tests, the fuzz targets and the micro benchmarks
// only. The names stay in sluice::http so that a differential reads as like for like.
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>

#include "oracle/beast_fields.hpp"
#include "sluice/http/edge_rules.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

using RequestHeader = boost::beast::http::header<true, Fields>;
using ResponseHeader = boost::beast::http::header<false, Fields>;

// `head` is exactly the bytes scan_request_head() reported complete (no leading empty lines, up
// to and including the final CRLFCRLF); `parser` is fresh. Beast parses them, then
// check_request_fields() applies the framing rules. The body is left to the caller.
Rejection parse_request_head(RequestParser& parser, std::string_view head);

// Likewise for a response head (any violation is a bad response: false). For a response to HEAD
// the parser is told there is no body.
bool parse_response_head(ResponseParser& parser, std::string_view head, bool is_head);

// The refusals of a parsed request head, in the session's order: 413 for a declared body over
// `max_body_bytes` (0: unlimited), 501 for CONNECT (a tunnel, RFC 9110 §9.3.6, which a reverse
// proxy does not offer), 400 for a malformed absolute-form target. An absolute-form target's
// authority replaces Host (RFC 9112 §3.2.2), so that routing and the origin agree on it.
Rejection admit_request(RequestParser& parser, std::uint64_t max_body_bytes);

// How an admitted request is forwarded, before rewriting. Expect is consumed here: 100-continue
// is answered hop by hop when the body is first read.
struct ForwardShape {
  bool expect_continue = false;  // the client waits for 100 Continue before sending its body
  bool chunked = false;          // the body is chunked
  bool upgrade = false;          // forwarded with its Upgrade (rewrite_request's `upgrade`)
};
ForwardShape shape_forward(RequestParser& parser, bool request_done);

// "name: value\r\n" for every field, in order. With `rules`: the fields they drop are left out
// and their lines follow (docs/edge.md), in the same pass.
void append_fields(std::string& out, const Fields& fields);
void append_fields(std::string& out, const Fields& fields, const HeaderRules& rules,
                   const Variables& vars);

// What a route changes in the request head it forwards, applied while the head is written.
struct RequestEdits {
  const PathRewrite* path = nullptr;  // nullptr: the target as received
  const HeaderRules* rules = nullptr;
  const Variables* vars = nullptr;  // required with `rules`
};

// The request head towards the origin, after rewrite_request(): always HTTP/1.1, the framing
// line (Transfer-Encoding: chunked) when the body is relayed chunked, and a Host (empty when the
// client sent none, as HTTP/1.0 may: HTTP/1.1 requires one).
void append_request_head(std::string& out, const RequestHeader& req, bool chunked,
                         const RequestEdits& edits = {});

// The interim (1xx) response head passed on to an HTTP/1.1 client, after strip_hop_by_hop().
void append_interim_head(std::string& out, const ResponseHeader& res);

// `client_keep_alive`: the request allowed it and the worker is not stopping.
ResponsePlan plan_response(const ResponseParser& parser, bool is_head, unsigned client_version,
                           bool client_keep_alive);

// The final response head towards the client, after rewrite_response(). `attempts` > 1 adds
// Sluice-Attempts. `rules` (with `vars`): the response header rules, applied in the same pass.
void append_response_head(std::string& out, const ResponseHeader& res, const ResponsePlan& plan,
                          unsigned client_version, unsigned attempts,
                          const HeaderRules* rules = nullptr, const Variables* vars = nullptr);

}  // namespace sluice::http
