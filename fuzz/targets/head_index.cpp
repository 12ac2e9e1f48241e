// (e) head_request / head_response: the head index (http/head_index.hpp) against the path it
// replaces, on the same bytes. The verdict must be the same (complete / need more / refused, and
// for a request the status and reason), except that a head with more field lines than the index
// holds is refused as too large; on what both accept, the index must agree with Beast's parse
// (method, target, version, status, reason, every field line in order, the framing facts) and
// the spliced head towards the origin or client must carry the same lines as the one rewritten
// and serialised from Beast's fields (the same start line, the same lines per name in the same
// order: the splice keeps the arrival order across names, Beast's fields group a name's lines).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>

#include "oracle/beast_head.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/request_id.hpp"
#include "sluice/http/rewrite.hpp"
#include "targets/util.hpp"

namespace sluice::fuzz {

namespace {

namespace bhttp = boost::beast::http;

constexpr std::size_t max_head = 4096;
constexpr std::size_t max_target = 1024;
constexpr std::uint64_t max_body = 64 * 1024;
constexpr std::string_view request_id = "0b5c6a1e-7d3f-4e2a-9c8b-1a2b3c4d5e6f";

// Header rules on both sides (docs/edge.md): a remove that hits a client field and one of ours,
// a set and an add with variables.
const http::HeaderRules& rules() {
  static const http::HeaderRules r = [] {
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    http::HeaderRules h;
    h.apply(std::vector<std::string>{"Cookie", "X-Forwarded-Proto", "Server", "x-request-id"},
            Pairs{{"X-Env", "prod"}, {"Vary", "$host"}}, Pairs{{"Via", "1.1 sluice $request_id"}});
    return h;
  }();
  return r;
}

http::Variables variables() {
  http::Variables v;
  v[http::Variable::request_id] = request_id;
  v[http::Variable::host] = "h.example";
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace

// A serialised head as its start line and its field lines ordered by name (stable: a name's lines
// keep their order).
std::string canonical_head(std::string_view head) {
  const auto first = head.find("\r\n");
  std::string out(head.substr(0, first + 2));
  Lines lines;
  auto rest = head.substr(first + 2);
  while (rest.size() > 2) {
    const auto eol = rest.find("\r\n");
    const auto line = rest.substr(0, eol);
    const auto colon = line.find(':');
    lines.emplace_back(lower(line.substr(0, colon)), std::string(line));
    rest.remove_prefix(eol + 2);
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [_, line] : lines) out.append(line).append("\r\n");
  return out;
}

namespace {

bool over_capacity(std::string_view head) {
  std::size_t lines = 0;
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos; at = head.find("\r\n", at + 2)) ++lines;
  return lines > http::HeadIndex::capacity + 2;  // start line and final empty line
}

// `skip_host`: admit_request() replaced Beast's Host with an absolute-form target's authority (the
// index says it as host()).
void check_fields(const http::HeadIndex& x, const http::Fields& fields, bool skip_host = false) {
  // Beast groups a name's lines at its first line; compare per name, in order.
  Lines ours;
  for (const auto& f : x.fields())
    if (!skip_host || f.known != http::KnownField::host) ours.emplace_back(lower(x.name(f)), std::string(x.value(f)));
  Lines beast;
  for (const auto& f : fields)
    if (!skip_host || f.name() != bhttp::field::host) beast.emplace_back(lower(f.name_string()), std::string(f.value()));
  const auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::stable_sort(ours.begin(), ours.end(), by_name);
  std::stable_sort(beast.begin(), beast.end(), by_name);
  check(ours == beast, "index fields differ from Beast's", show(ours) + " vs " + show(beast));
  for (const auto& f : fields) {
    if (skip_host && f.name() == bhttp::field::host) continue;
    check(x.count(f.name_string()) == fields.count(f.name_string()), "count by name", f.name_string());
    check(x.value(f.name_string()) == std::string_view(fields[f.name_string()]), "value by name", f.name_string());
  }
}

void check_request(std::string_view bytes, const http::RequestHead& idx, http::RequestParser& parser) {
  auto& req = parser.get();
  check(idx.method() == std::string_view(req.method_string()), "method");
  check(idx.verb() == req.method(), "verb");
  check(idx.target() == std::string_view(req.target()), "target");
  check(idx.version() == req.version(), "version");
  check(idx.keep_alive() == parser.keep_alive(), "keep-alive");
  check(idx.chunked() == parser.chunked(), "chunked");
  check(idx.content_length() == (parser.content_length() ? std::optional<std::uint64_t>(*parser.content_length()) : std::nullopt),
        "content-length");
  check(idx.body_done() == parser.is_done(), "body done");
  check_fields(idx, req, idx.host_from_target());
  (void)bytes;
}

}  // namespace

void head_index_request(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Today's path: next_head, parse_request_head, admit_request (DownstreamSession::read_request_head and
  // handle_request).
  const auto step = http::next_head(bytes, max_head, max_target);
  http::Rejection old;
  http::RequestParser parser;
  if (step.scan.result == http::HeadScan::Result::invalid) {
    old = {http::status_for(step.scan.violation), http::describe(step.scan.violation)};
  } else if (step.scan.result == http::HeadScan::Result::complete) {
    const auto head = bytes.substr(step.skipped, step.scan.head_size);
    old = http::parse_request_head(parser, head);
    if (!old) old = http::admit_request(parser, max_body);
  }
  http::RequestHead idx;
  const auto v = http::index_request_head(bytes, {max_head, max_target, max_body}, idx);
  if (step.scan.result == http::HeadScan::Result::complete && v.rejection.status == 431 &&
      v.rejection.reason == "header too large" && old.status != 431 &&
      over_capacity(bytes.substr(step.skipped, step.scan.head_size)))
    return;  // above the index's capacity: refused 431 on purpose
  check(v.result == step.scan.result || (old && v.result == http::HeadScan::Result::invalid), "request result");
  check(v.rejection.status == old.status && v.rejection.reason == old.reason, "request verdict",
        std::to_string(v.rejection.status) + " " + std::string(v.rejection.reason) + " vs " +
            std::to_string(old.status) + " " + std::string(old.reason));
  if (v.result != http::HeadScan::Result::complete) return;
  check(v.head_start == step.skipped && v.head_size == step.scan.head_size, "request head size");
  check_request(bytes, idx, parser);

  auto& req = parser.get();
  check(idx.has_host() == (req.count(bhttp::field::host) != 0), "has host");
  if (idx.has_host()) check(idx.host() == std::string_view(req[bhttp::field::host]), "host");
  http::RequestIdGenerator gen(1);
  char storage[37];
  char storage2[37];
  http::RequestIdGenerator gen2(1);
  check(http::choose_request_id(idx, gen, storage) == http::choose_request_id(req, gen2, storage2), "request id");
  // forward(): shape_forward (consumes Expect), rewrite_request, append_request_head.
  const bool done = parser.is_done();
  const auto shape = http::shape_forward(parser, done);
  const bool upgrade = http::wants_upgrade(idx, !done);
  check(upgrade == shape.upgrade, "upgrade");
  const auto vars = variables();
  const http::PathRewrite rewrite{1, "/p/"};
  for (const int variant : {0, 1, 2, 3}) {
    // rewrite_request changes the fields: a copy per variant. 1: Forwarded added; 2: header
    // rules and a path rewrite; 3: a chunked body kept whole goes with a Content-Length
    // (DownstreamSession::keep_chunked_body).
    if (variant == 3 && !shape.chunked) continue;
    http::RequestHeader header = static_cast<const http::RequestHeader&>(req);
    const http::ForwardedFor info{variant == 1 ? "2001:db8::7" : "192.0.2.7", "https", request_id, upgrade,
                                  variant == 1};
    http::rewrite_request(header, info);
    std::string want;
    std::string got;
    http::RequestSplice splice;
    splice.forwarded = info;
    splice.chunked = shape.chunked;
    if (variant == 2) {
      http::append_request_head(want, header, shape.chunked, {&rewrite, &rules(), &vars});
      splice.path = &rewrite;
      splice.rules = &rules();
      splice.vars = &vars;
    } else if (variant == 3) {
      header.set(bhttp::field::content_length, "123");
      http::append_request_head(want, header, false);
      splice.chunked = false;
      splice.content_length = 123;
    } else {
      http::append_request_head(want, header, shape.chunked);
    }
    http::splice_request_head(got, idx, splice);
    check(canonical_head(got) == canonical_head(want), "spliced request head", got + " vs " + want);
  }
}

void head_index_response(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  // Byte 0: bit 0 HEAD request, bit 1 HTTP/1.0 client, bit 2 client keep-alive, bit 3 retried.
  const bool is_head = (data[0] & 1) != 0;
  const unsigned client_version = (data[0] & 2) != 0 ? 10 : 11;
  const bool client_keep_alive = (data[0] & 4) != 0;
  const unsigned attempts = (data[0] & 8) != 0 ? 2 : 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto scan = http::scan_response_head(bytes, max_head);
  http::ResponseParser parser;
  bool old_ok = scan.result == http::HeadScan::Result::complete &&
                http::parse_response_head(parser, bytes.substr(0, scan.head_size), is_head);
  http::ResponseHead idx;
  const auto v = http::index_response_head(bytes, max_head, idx);
  if (old_ok && v.result == http::HeadScan::Result::invalid && over_capacity(bytes.substr(0, scan.head_size)))
    return;
  const auto old_result = scan.result == http::HeadScan::Result::complete && !old_ok
                              ? http::HeadScan::Result::invalid : scan.result;
  check(v.result == old_result, "response result");
  if (!old_ok) return;
  auto& res = parser.get();
  // Beast's reason() is the obsolete reason phrase when the line has none.
  const auto reason = idx.reason().empty() ? std::string_view(bhttp::obsolete_reason(res.result())) : idx.reason();
  check(idx.status() == res.result_int() && reason == std::string_view(res.reason()) &&
            idx.version() == res.version(), "status line");
  check(idx.keep_alive(is_head) == parser.keep_alive(), "response keep-alive");
  check(idx.chunked() == parser.chunked(), "response chunked");
  check_fields(idx, res);
  const auto plan = http::plan_response(parser, is_head, client_version, client_keep_alive);
  const auto plan2 = http::plan_response(idx, is_head, client_version, client_keep_alive);
  check(plan.body_expected == plan2.body_expected && plan.chunked_in == plan2.chunked_in &&
            plan.until_close == plan2.until_close && plan.chunked_out == plan2.chunked_out &&
            plan.keep_alive == plan2.keep_alive && plan.refuse == plan2.refuse, "plan");
  if (plan.refuse) return;
  const auto code = res.result_int();
  std::string want;
  std::string got;
  if (code == 101) {
    // DownstreamSession::tunnel(): rewrite_response with the switch, the fields as they are.
    http::rewrite_response(res, request_id, true);
    want = "HTTP/1.1 101 ";
    const std::string_view r = res.reason();
    want.append(r.empty() ? std::string_view("Switching Protocols") : r).append("\r\n");
    http::append_fields(want, res);
    want.append("\r\n");
    http::splice_response_head(got, idx, {request_id, {}, 11, 1, http::ResponseSplice::Kind::switching});
  } else if (code < 200) {
    // DownstreamSession::read_response_head(): an interim head passed on.
    http::strip_hop_by_hop(res);
    http::strip_origin_claims(res, code);
    http::append_interim_head(want, res);
    http::splice_response_head(got, idx, {request_id, {}, 11, 1, http::ResponseSplice::Kind::interim});
  } else {
    // DownstreamSession::send_response(): rewrite_response, strip_origin_claims, append_response_head;
    // with the route's header rules when byte 0's bit 4 says so.
    http::rewrite_response(res, request_id);
    http::strip_origin_claims(res, code);
    const bool with_rules = (data[0] & 16) != 0;
    const auto vars = variables();
    const auto* r = with_rules ? &rules() : nullptr;
    http::append_response_head(want, res, plan, client_version, attempts, r, with_rules ? &vars : nullptr);
    http::splice_response_head(got, idx, {request_id, plan, client_version, attempts,
                                          http::ResponseSplice::Kind::final_head, r, &vars});
  }
  check(canonical_head(got) == canonical_head(want), "spliced response head", got + " vs " + want);
}

}  // namespace sluice::fuzz
