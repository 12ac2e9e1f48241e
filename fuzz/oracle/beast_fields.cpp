#include "oracle/beast_fields.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "sluice/http/head_scanner.hpp"
#include "sluice/http/request_id.hpp"

namespace sluice::http {

namespace {

namespace bhttp = boost::beast::http;
using boost::beast::iequals;

constexpr std::string_view k_forwarded_for = "X-Forwarded-For";
constexpr std::string_view k_forwarded_proto = "X-Forwarded-Proto";
constexpr std::string_view k_forwarded_host = "X-Forwarded-Host";
constexpr std::string_view k_request_id = "X-Request-Id";

bool may_drop(std::string_view option) noexcept { return connection_may_drop(option); }

void set_request_id(Fields& fields, std::string_view request_id) {
  // fields::set() builds the new line before it drops the old ones, so request_id may point
  // into the X-Request-Id being replaced.
  if (request_id.empty()) {
    fields.erase(k_request_id);
  } else {
    fields.set(k_request_id, request_id);
  }
}

// Calls f(protocol) for each element of the Upgrade lines (RFC 9110 §7.8: a comma-separated list
// of "name[/version]"; empty elements and surrounding whitespace ignored). f returns false to stop.
template <class F>
bool for_each_protocol(const Fields& fields, F&& f) {
  const auto [first, last] = fields.equal_range(bhttp::field::upgrade);
  for (auto line = first; line != last; ++line) {
    if (!for_each_list_element(line->value(), f)) return false;
  }
  return true;
}

bool has_upgrade_option(const Fields& fields) {
  for (auto line = fields.equal_range(bhttp::field::connection).first;
       line != fields.end() && line->name() == bhttp::field::connection; ++line) {
    for (const auto option : bhttp::opt_token_list{line->value()})
      if (iequals(option, "upgrade")) return true;
  }
  return false;
}

// RFC 9110 §7.6.1: the hop-by-hop fields, named by a Connection option or not; Proxy-Connection
// and Keep-Alive are the pre-standard ones. Framing (TE) is redone by whoever forwards the body.
constexpr bool is_hop_by_hop(bhttp::field name) noexcept {
  switch (name) {
    case bhttp::field::connection:
    case bhttp::field::keep_alive:
    case bhttp::field::proxy_connection:
    case bhttp::field::te:
    case bhttp::field::trailer:
    case bhttp::field::transfer_encoding:
    case bhttp::field::upgrade:
    case bhttp::field::http2_settings:
      return true;
    default:
      return false;
  }
}

// Joins the lines of list field `name` into one, in arrival order, then appends one element made
// of `parts` (none when they are all empty). Built in the fields' own allocator (the request's
// arena on the data path).
void append_hop(Fields& fields, std::string_view name, std::initializer_list<std::string_view> parts) {
  std::basic_string<char, std::char_traits<char>, Allocator> chain(fields.get_allocator());
  const auto [first, last] = fields.equal_range(name);  // in arrival order
  for (auto line = first; line != last; ++line) {
    if (line->value().empty()) continue;
    if (!chain.empty()) chain += ", ";
    chain += line->value();
  }
  const bool has_element = std::any_of(parts.begin(), parts.end(), [](auto p) { return !p.empty(); });
  if (has_element) {
    if (!chain.empty()) chain += ", ";
    for (const auto part : parts) chain += part;
  }
  if (chain.empty()) {
    fields.erase(name);
  } else {
    fields.set(name, std::string_view(chain));
  }
}

// Beast stops at the second of two conflicting framing fields and names that one; the head bytes
// tell what the message really carried. The head passed the raw scan, so lines end in CRLF.
Violation framing_violation(std::string_view head, Violation beast_says) noexcept {
  bool content_length = false;
  bool transfer_encoding = false;
  while (!head.empty()) {
    const auto eol = head.find("\r\n");
    const auto line = head.substr(0, eol);
    const auto name = line.substr(0, line.find(':'));
    content_length |= boost::beast::iequals(name, "content-length");
    transfer_encoding |= boost::beast::iequals(name, "transfer-encoding");
    if (eol == std::string_view::npos) break;
    head.remove_prefix(eol + 2);
  }
  if (content_length && transfer_encoding) return Violation::content_length_with_transfer_encoding;
  return beast_says;
}

detail::FramingFacts framing_facts(const Fields& fields) noexcept {
  detail::FramingFacts f;
  f.te_lines = fields.count(bhttp::field::transfer_encoding);
  f.cl_lines = fields.count(bhttp::field::content_length);
  if (f.te_lines != 0) f.te = fields.find(bhttp::field::transfer_encoding)->value();
  if (f.cl_lines != 0) f.cl = fields.find(bhttp::field::content_length)->value();
  return f;
}

}  // namespace

Violation check_request_fields(const Fields& fields, unsigned version) noexcept {
  bool variant = false;
  for (const auto& f : fields) variant = variant || detail::is_framing_variant(f.name_string());
  const auto hosts = fields.count(bhttp::field::host);
  const std::string_view host = hosts != 0 ? std::string_view(fields.find(bhttp::field::host)->value()) : std::string_view();
  return detail::check_request_facts(framing_facts(fields), variant, hosts, host, version);
}

Violation check_response_fields(const Fields& fields) noexcept {
  return check_response_fields(fields, 11);
}

Violation check_response_fields(const Fields& fields,
                                unsigned version) noexcept {
  return detail::check_framing(framing_facts(fields), version, false);
}

Violation violation_from_parser_error(const boost::system::error_code& ec,
                                      std::string_view head) noexcept {
  using bhttp::error;
  if (ec == error::bad_chunk || ec == error::bad_chunk_extension) return Violation::bad_chunk;
  if (ec == error::bad_content_length || ec == error::multiple_content_length) {
    return framing_violation(head, Violation::bad_content_length);
  }
  if (ec == error::bad_transfer_encoding) {
    return framing_violation(head, Violation::bad_transfer_encoding);
  }
  if (ec == error::header_limit) return Violation::head_too_large;
  if (ec == error::bad_method) return Violation::bad_method;
  if (ec == error::bad_target) return Violation::bad_target;
  if (ec == error::bad_version) return Violation::bad_version;
  if (ec == error::bad_status || ec == error::bad_reason) return Violation::bad_status_line;
  if (ec == error::bad_field) return Violation::bad_field_name;
  if (ec == error::bad_value) return Violation::bad_field_value;
  if (ec == error::bad_line_ending) return Violation::bare_cr;
  return Violation::none;
}

bool wants_upgrade(const Fields& fields, unsigned version, bool is_get, bool has_body) noexcept {
  // RFC 9110 §7.8: Upgrade in an HTTP/1.0 request is ignored. A body would have to be read in the
  // old protocol before the switch; WebSocket (RFC 6455 §4.1) is a GET without one.
  if (version != 11 || !is_get || has_body || !has_upgrade_option(fields)) return false;
  bool any = false;
  for_each_protocol(fields, [&](std::string_view p) {
    any = !is_h2c(p);
    return !any;
  });
  return any;
}

bool valid_switch(const Fields& response, const Fields& request) noexcept {
  bool any = false;
  const bool all_offered = for_each_protocol(response, [&](std::string_view chosen) {
    any = true;
    return !for_each_protocol(request, [&](std::string_view offered) { return !iequals(chosen, offered); });
  });
  return any && all_offered;
}

void strip_hop_by_hop(Fields& fields) {
  // RFC 9110 §7.6.1: a proxy MUST remove the fields named by the Connection options of every
  // Connection line. fields keeps the lines of one name together, starting at equal_range()'s
  // first. Its end is not used: it may be the very field an option erases. The Connection lines
  // themselves stay (may_drop refuses "connection"), so `line` remains valid. An option naming a
  // hop-by-hop field ("keep-alive", the common case) needs no lookup: the pass below drops it.
  for (auto line = fields.equal_range(bhttp::field::connection).first;
       line != fields.end() && line->name() == bhttp::field::connection; ++line) {
    for (const auto option : bhttp::opt_token_list{line->value()}) {
      if (iequals(option, "close") || iequals(option, "keep-alive")) continue;
      if (is_hop_by_hop(bhttp::string_to_field(option))) continue;
      if (may_drop(option)) fields.erase(option);
    }
  }
  // One pass in arrival order, comparing each line's field enum: cheaper than one name lookup
  // (a case-insensitive tree search) per hop-by-hop name.
  for (auto it = fields.begin(); it != fields.end();)
    it = is_hop_by_hop(it->name()) ? fields.erase(it) : std::next(it);
}

void rewrite_request(Fields& fields, const ForwardedFor& info) {
  // The protocols offered, less h2c, as one line (in the fields' allocator: the arena).
  std::basic_string<char, std::char_traits<char>, Allocator> protocols(fields.get_allocator());
  if (info.upgrade) {
    for_each_protocol(fields, [&](std::string_view p) {
      if (is_h2c(p)) return true;
      if (!protocols.empty()) protocols += ", ";
      protocols += p;
      return true;
    });
  }
  strip_hop_by_hop(fields);
  if (!protocols.empty()) {
    fields.set(bhttp::field::upgrade, std::string_view(protocols));
    fields.set(bhttp::field::connection, "upgrade");
  }

  // X-Forwarded-For: the hops already listed, in order and joined into one line, then the peer.
  append_hop(fields, k_forwarded_for, {info.client_ip});
  if (info.forwarded) {
    // RFC 7239 §4, §6: an IPv6 node is "[v6]" in a quoted string; Host is quoted as it may hold
    // a ':' (not a token character).
    const bool v6 = info.client_ip.find(':') != std::string_view::npos;
    const auto host = fields.find(bhttp::field::host);
    const std::string_view host_value = host != fields.end() ? std::string_view(host->value()) : std::string_view();
    const bool quotable = host_value.find_first_of("\"\\") == std::string_view::npos;
    append_hop(fields, "Forwarded",
               {"for=", v6 ? "\"[" : "", info.client_ip, v6 ? "]\"" : "",
                !host_value.empty() && quotable ? ";host=\"" : "",
                !host_value.empty() && quotable ? host_value : "",
                !host_value.empty() && quotable ? "\"" : "", ";proto=", info.proto});
  }

  // Proto and Host describe the hop into us, so ours replace whatever the client claimed; without
  // a Host (HTTP/1.0) a client-supplied X-Forwarded-Host would pass as ours, so it goes.
  fields.set(k_forwarded_proto, info.proto);
  if (const auto host = fields.find(bhttp::field::host); host != fields.end()) {
    fields.set(k_forwarded_host, host->value());
  } else {
    fields.erase(k_forwarded_host);
  }
  set_request_id(fields, info.request_id);
}

void rewrite_response(Fields& fields, std::string_view request_id, bool switching) {
  std::basic_string<char, std::char_traits<char>, Allocator> protocols(fields.get_allocator());
  if (switching) {
    for_each_protocol(fields, [&](std::string_view p) {
      if (!protocols.empty()) protocols += ", ";
      protocols += p;
      return true;
    });
  }
  // RFC 9112 §6.1: codings before the final chunked ("gzip, chunked") describe the bytes we
  // relay unchanged, so they stay in Transfer-Encoding; only plain chunked is re-added by us.
  std::basic_string<char, std::char_traits<char>, Allocator> codings(fields.get_allocator());
  if (const auto te = fields[bhttp::field::transfer_encoding]; has_codings_before_chunked(te))
    codings = te;
  strip_hop_by_hop(fields);
  if (!protocols.empty()) {
    fields.set(bhttp::field::upgrade, std::string_view(protocols));
    fields.set(bhttp::field::connection, "upgrade");
  }
  if (!codings.empty()) fields.set(bhttp::field::transfer_encoding, std::string_view(codings));
  set_request_id(fields, request_id);
}

void strip_origin_claims(Fields& fields, unsigned status) {
  // Only sluice speaks as sluice: an origin's Sluice-Error would read as our diagnosis.
  for (auto it = fields.begin(); it != fields.end();) {
    const auto name = it->name_string();
    const bool ours = name.size() >= 7 && iequals(name.substr(0, 7), "sluice-");
    it = ours ? fields.erase(it) : std::next(it);
  }
  // RFC 9110 §8.6, §15.2, §15.3.5, §15.4.5: 1xx and 204 have no content and no framing; a 304's
  // Content-Length would describe a body that is not there. A client that honours either desyncs.
  if (status < 200 || status == 204 || status == 304) {
    fields.erase(bhttp::field::content_length);
    fields.erase(bhttp::field::transfer_encoding);
  }
}

std::string_view choose_request_id(const Fields& fields, RequestIdGenerator& gen,
                                   char (&storage)[37]) {
  // Keep the client's id so that its logs and ours correlate; several lines are ambiguous.
  if (fields.count(k_request_id) == 1) {
    const auto id = fields.find(k_request_id)->value();
    if (sane_request_id(id)) return id;
  }
  return gen.next(storage);
}

}  // namespace sluice::http
