#pragma once
// The test oracle's rules over Beast's fields (fuzz/oracle/beast_head.hpp parses into them): the
// framing checks after Beast's parser, and the header rewriting of the head sent on. The head
// index (sluice/http/head_index.hpp) applies the same rules to its own index; the unit tests and
// the fuzz targets compare the two. Not in the sluice binary.
#include <string_view>

#include <boost/system/error_code.hpp>

#include "sluice/http/message.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/http/strict.hpp"

namespace sluice::http {

// The framing and Host rules (detail::check_*, head_scanner.hpp) over a head Beast parsed.
// `version` is 10 or 11.
Violation check_request_fields(const Fields& fields, unsigned version) noexcept;
Violation check_response_fields(const Fields& fields) noexcept;  // HTTP/1.1
Violation check_response_fields(const Fields& fields,
                                unsigned version) noexcept;

// Maps an error from Beast's parser to the violation it stands for (none when it is not a protocol
// violation, e.g. end_of_stream or body_limit). Beast rejects some framing conflicts itself before
// check_*_fields() can run, and names whichever field came second; pass the head bytes that were
// fed to it and the answer is refined (e.g. to content_length_with_transfer_encoding).
Violation violation_from_parser_error(const boost::system::error_code& ec,
                                      std::string_view head = {}) noexcept;

// Removes Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade and HTTP2-Settings. (The caller re-adds its own framing: chunked or
// Content-Length.)
void strip_hop_by_hop(Fields& fields);

// The Upgrade rule (rewrite.hpp, RFC 9110 §7.8) over Beast's fields.
bool wants_upgrade(const Fields& fields, unsigned version, bool is_get, bool has_body) noexcept;

// Request towards the origin: strip hop-by-hop fields, append the client to X-Forwarded-For
// (joining existing values with ", "), set X-Forwarded-Proto, set X-Forwarded-Host from Host
// (when present), set X-Request-Id; with info.forwarded, append "for=CLIENT;host=\"HOST\";proto=P"
// to Forwarded the same way. Host itself is kept unchanged. With info.upgrade the
// Upgrade field survives as one line without h2c, with "Connection: upgrade" as the only option.
void rewrite_request(Fields& fields, const ForwardedFor& info);

// Is a 101 answer acceptable for a request forwarded with upgrade? Its Upgrade must be present and
// name only protocols the request offered (RFC 9110 §7.8: a server MUST NOT switch to a protocol
// the client did not ask for); `request` is the forwarded request's fields.
bool valid_switch(const Fields& response, const Fields& request) noexcept;

// Response towards the client: strip hop-by-hop fields, echo X-Request-Id. For a 101
// (`switching`) the origin's Upgrade is kept and "Connection: upgrade" sent, as the client needs.
// A Transfer-Encoding with codings before chunked ("gzip, chunked") is kept as it is: the body is
// relayed unchanged, re-chunked, and those codings describe it.
void rewrite_response(Fields& fields, std::string_view request_id, bool switching = false);

// What an origin may not pass on through us, for final and interim heads alike: every Sluice-*
// field, and Content-Length / Transfer-Encoding on a 1xx, 204 or 304.
void strip_origin_claims(Fields& fields, unsigned status);

class RequestIdGenerator;
// The X-Request-Id to use: the client's own when present and sane (1..128 visible ASCII chars),
// else a fresh one written into `storage` from `gen`.
std::string_view choose_request_id(const Fields& fields, RequestIdGenerator& gen,
                                   char (&storage)[37]);

}  // namespace sluice::http
