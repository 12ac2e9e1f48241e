// The head index: one pass of the strict scanner (head_scanner.hpp) whose Sink fills the index
// and checks the Connection and framing lines as they arrive, then the framing and Host rules of
// strict.cpp (detail::check_*) and the admission rules over what it collected.
//
// The lines checked as they arrive, in order; the first that fails refuses the head (a request
// with 400, a response as a bad response):
//  - Connection or Proxy-Connection whose value is not a list of tokens (RFC 9110 §5.6.1):
//    "bad field value". Its options decide keep-alive and which fields are hop-by-hop (§7.6.1),
//    so a value that cannot be read as options is not guessed at.
//  - Content-Length that is not a list of equal decimal numbers each within 64 bits, that
//    differs from an earlier Content-Length, or that follows a Transfer-Encoding ending in
//    chunked. (An equal list "42, 42", or the same value on two lines, passes here and is
//    refused by the framing rules after the last line, strict.cpp.)
//  - Transfer-Encoding after a Content-Length, or after a Transfer-Encoding ending in chunked
//    (chunked is applied once and last, RFC 9112 §6.1).
// Two framings that disagree are how requests are smuggled (RFC 9112 §6.3, 11.2): the refusal
// names the conflict when the head has both framing fields ("content-length with
// transfer-encoding"), else the bad Content-Length or Transfer-Encoding. A line ends in chunked
// when chunked is its last coding and named nowhere before it in that line.
//
// The fuzz targets head_request / head_response (fuzz/targets/head_index.cpp) compare the
// index's verdict on every input with a second implementation (fuzz/oracle/, Beast's parser).
#include "sluice/http/head_index.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>

#include "sluice/http/edge_rules.hpp"
#include "sluice/http/head_out.hpp"
#include "sluice/http/head_scanner.hpp"
#include "sluice/http/intake.hpp"
#include "sluice/http/request_id.hpp"

namespace sluice::http {

namespace bhttp = boost::beast::http;
using boost::beast::iequals;

namespace {

// Calls f(option) for each element of a comma-separated list value (OWS trimmed); false when the
// value is not a list of tokens (RFC 9110 §5.6.1: empty elements allowed). A value that is one
// token, the common case ("close", "keep-alive"), is that one element: no list walk for it.
template <class F>
bool for_each_option(std::string_view value, F&& f) {
  if (is_token(value)) {
    f(value);
    return true;
  }
  const bhttp::opt_token_list list{value};
  if (!bhttp::validate_list(list)) return false;
  for (const auto option : list) f(std::string_view(option.data(), option.size()));
  return true;
}

struct Known {
  std::string_view lower;
  KnownField field;
};

constexpr Known k_known[] = {
    {"host", KnownField::host},
    {"content-length", KnownField::content_length},
    {"transfer-encoding", KnownField::transfer_encoding},
    {"connection", KnownField::connection},
    {"keep-alive", KnownField::keep_alive},
    {"proxy-connection", KnownField::proxy_connection},
    {"upgrade", KnownField::upgrade},
    {"expect", KnownField::expect},
    {"te", KnownField::te},
    {"trailer", KnownField::trailer},
    {"http2-settings", KnownField::http2_settings},
    {"proxy-authorization", KnownField::proxy_authorization},
    {"proxy-authenticate", KnownField::proxy_authenticate},
    {"x-forwarded-for", KnownField::x_forwarded_for},
    {"x-forwarded-proto", KnownField::x_forwarded_proto},
    {"x-forwarded-host", KnownField::x_forwarded_host},
    {"x-request-id", KnownField::x_request_id},
    {"forwarded", KnownField::forwarded},
    {"idempotency-key", KnownField::idempotency_key},
    {"cookie", KnownField::cookie},
    {"date", KnownField::date},
};

// The known names by length, so that a name is compared with at most the two or three of its
// size (names longer than the longest known one are unknown at once).
constexpr std::size_t k_longest = 19;
struct ByLength {
  std::array<std::array<std::uint8_t, 4>, k_longest + 1> slots{};
  std::array<std::uint8_t, k_longest + 1> size{};
};
constexpr ByLength make_by_length() {
  ByLength t;
  for (std::size_t i = 0; i < std::size(k_known); ++i) {
    const auto n = k_known[i].lower.size();
    t.slots[n][t.size[n]++] = static_cast<std::uint8_t>(i);
  }
  return t;
}
constexpr auto k_by_length = make_by_length();

// `name` is a token (the scan checked): OR-ing 0x20 lower-cases its letters and leaves '-' and
// digits alone, and no other tchar lands on one of those. Compared a word at a time: 8 bytes (the
// last word overlapping the one before it), 4 for a name under 8 bytes, bytes under 4. A
// byte-by-byte loop was 86 instructions per field line (bench/callgrind.sh).
template <class Word>
Word load(const char* p) noexcept {
  Word w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

template <class Word>
bool words_equal(const char* name, const char* lower, std::size_t n) noexcept {
  constexpr Word case_bits = static_cast<Word>(0x2020202020202020ULL);
  for (std::size_t i = 0; i + sizeof(Word) < n; i += sizeof(Word))
    if ((load<Word>(name + i) | case_bits) != load<Word>(lower + i)) return false;
  const std::size_t last = n - sizeof(Word);
  return (load<Word>(name + last) | case_bits) == load<Word>(lower + last);
}

bool lower_equals(std::string_view name, std::string_view lower) noexcept {
  const auto n = lower.size();
  if (n >= 8) return words_equal<std::uint64_t>(name.data(), lower.data(), n);
  if (n >= 4) return words_equal<std::uint32_t>(name.data(), lower.data(), n);
  for (std::size_t i = 0; i < n; ++i)
    if ((static_cast<unsigned char>(name[i]) | 0x20) != static_cast<unsigned char>(lower[i])) return false;
  return true;
}

// A Connection value that is exactly one of the two common options, in any case: no list walk,
// no token check. (A value has no CR, so OR-ing 0x20 matches '-' only for '-'.)
bool is_option(std::string_view value, std::string_view lower) noexcept {
  return value.size() == lower.size() && lower_equals(value, lower);
}

}  // namespace

KnownField classify_field(std::string_view name) noexcept {
  const auto n = name.size();
  if (n >= 7 && (static_cast<unsigned char>(name[0]) | 0x20) == 's' && lower_equals(name.substr(0, 7), "sluice-"))
    return KnownField::sluice;
  if (n > k_longest) return KnownField::unknown;
  for (std::size_t i = 0; i < k_by_length.size[n]; ++i) {
    const auto& k = k_known[k_by_length.slots[n][i]];
    if (lower_equals(name, k.lower)) return k.field;
  }
  return KnownField::unknown;
}

bool is_hop_by_hop(KnownField f) noexcept {
  switch (f) {
    case KnownField::connection:
    case KnownField::keep_alive:
    case KnownField::proxy_connection:
    case KnownField::te:
    case KnownField::trailer:
    case KnownField::transfer_encoding:
    case KnownField::upgrade:
    case KnownField::http2_settings:
      return true;
    default:
      return false;
  }
}

const IndexedField* HeadIndex::find(KnownField k) const noexcept {
  return count(k) == 0 ? nullptr : &fields_[first_[static_cast<std::size_t>(k)]];
}

const IndexedField* HeadIndex::find(std::string_view n) const noexcept {
  if (const auto k = classify_field(n); k != KnownField::unknown && k != KnownField::sluice) return find(k);
  for (std::size_t i = 0; i < size_; ++i)
    if (iequals(name(fields_[i]), n)) return &fields_[i];
  return nullptr;
}

std::size_t HeadIndex::count(std::string_view n) const noexcept { return count(n, classify_field(n)); }

std::size_t HeadIndex::count(std::string_view n, KnownField k) const noexcept {
  if (k != KnownField::unknown && k != KnownField::sluice) return count(k);
  return static_cast<std::size_t>(std::count_if(fields_.begin(), fields_.begin() + static_cast<std::ptrdiff_t>(size_),
                                                [&](const IndexedField& f) { return iequals(name(f), n); }));
}

std::string_view HeadIndex::value(KnownField k) const noexcept {
  const auto* f = find(k);
  return f == nullptr ? std::string_view() : value(*f);
}

std::string_view HeadIndex::value(std::string_view n) const noexcept {
  const auto* f = find(n);
  return f == nullptr ? std::string_view() : value(*f);
}

bool ResponseHead::keep_alive(bool is_head) const noexcept {
  // A body with neither a length nor chunked ends when the connection closes (RFC 9112 §6.3).
  const bool body = !is_head && status_ / 100 != 1 && status_ != 204 && status_ != 304;
  if (body && !content_length_ && !chunked_) return false;
  return version_ == 11 ? !close_ : keep_alive_option_;
}

// The scanner's Sink: indexes each line that passed the byte rules and checks the Connection and
// framing lines as they arrive (the rules at the top of this file), keeping the first that fails.
struct IndexBuilder {
  enum class LineError : std::uint8_t { none, connection, on_content_length, on_transfer_encoding };

  struct State {
    State(HeadIndex* x, RequestHead* req, ResponseHead* res, const char* b) noexcept
        : index(x), request(req), response(res), base(b) {}
    HeadIndex* index;
    RequestHead* request;
    ResponseHead* response;
    const char* base;
    bool overflow = false;
    bool framing_variant = false;
    LineError line_error = LineError::none;
    bool chunked = false;  // the last Transfer-Encoding line so far ends in chunked
    std::optional<std::uint64_t> length;  // the Content-Length lines' value
  };
  State* s;

  std::uint32_t at(std::string_view part) const noexcept {
    return static_cast<std::uint32_t>(part.data() - s->base);
  }

  void request_line(std::string_view method, std::string_view target, unsigned version) noexcept {
    auto& r = *s->request;
    r.method_at_ = at(method);
    r.method_size_ = static_cast<std::uint32_t>(method.size());
    r.target_at_ = at(target);
    r.target_size_ = static_cast<std::uint32_t>(target.size());
    r.verb_ = bhttp::string_to_verb(method);
    r.version_ = version;
  }

  void status_line(unsigned version, unsigned status, std::string_view reason) noexcept {
    auto& r = *s->response;
    r.version_ = version;
    r.status_ = status;
    r.reason_at_ = at(reason);
    r.reason_size_ = static_cast<std::uint32_t>(reason.size());
  }

  void field(std::size_t name_at, std::size_t name_size, std::size_t value_at, std::size_t value_end) noexcept {
    auto& x = *s->index;
    if (x.size_ == HeadIndex::capacity) {
      s->overflow = true;
      return;
    }
    const char* b = s->base;
    while (value_at < value_end && chars::is_ows(static_cast<unsigned char>(b[value_at]))) ++value_at;
    while (value_end > value_at && chars::is_ows(static_cast<unsigned char>(b[value_end - 1]))) --value_end;
    const std::string_view name(b + name_at, name_size);
    const std::string_view value(b + value_at, value_end - value_at);
    const auto known = classify_field(name);
    auto& f = x.fields_[x.size_];
    f = {static_cast<std::uint32_t>(name_at), static_cast<std::uint32_t>(value_at),
         static_cast<std::uint32_t>(value.size()), static_cast<std::uint32_t>(name_size), known,
         is_hop_by_hop(known)};
    const auto k = static_cast<std::size_t>(known);
    if (x.count_[k]++ == 0) x.first_[k] = static_cast<std::uint8_t>(x.size_);
    ++x.size_;
    // A variant has the length of one of the two framing names ("content_length", 14;
    // "transfer_encoding", 17): no search for '_' in any other unknown name.
    if (known == KnownField::unknown && (name_size == 14 || name_size == 17) && name.find('_') != std::string_view::npos)
      s->framing_variant = s->framing_variant || detail::is_framing_variant(name);
    if (s->line_error == LineError::none) check_line(known, value);
  }

  void check_line(KnownField known, std::string_view value) noexcept {
    switch (known) {
      case KnownField::connection:
      case KnownField::proxy_connection: return connection(known, value);
      case KnownField::content_length: return content_length_line(value);
      case KnownField::transfer_encoding: return transfer_encoding_line(value);
      default: return;
    }
  }

  void connection(KnownField known, std::string_view value) noexcept {
    auto& x = *s->index;
    if (is_option(value, "keep-alive")) {
      x.keep_alive_option_ = true;
      return;
    }
    if (is_option(value, "close")) {
      x.close_ = true;
      return;
    }
    const bool valid = for_each_option(value, [&](std::string_view option) {
      if (iequals(option, "close")) x.close_ = true;
      else if (iequals(option, "keep-alive")) x.keep_alive_option_ = true;
      else if (iequals(option, "upgrade")) x.upgrade_option_ = x.upgrade_option_ || known == KnownField::connection;
    });
    if (!valid) s->line_error = LineError::connection;
  }

  // A list of equal decimal values, each within 64 bits, equal to any earlier Content-Length;
  // not after a Transfer-Encoding ending in chunked.
  void content_length_line(std::string_view value) noexcept {
    const auto bad = [&] { s->line_error = LineError::on_content_length; };
    if (s->chunked) return bad();
    // The common value, one number (up to 2^63-1): what the walk of the list below finds for it,
    // without the walk.
    if (const auto v = detail::parse_content_length(value)) {
      if (s->length && *s->length != *v) return bad();
      s->length = *v;
      return;
    }
    const bhttp::opt_token_list tokens{value};
    if (tokens.begin() == tokens.end() || !bhttp::validate_list(tokens)) return bad();
    auto unprocessed = 1 + std::count(value.begin(), value.end(), ',');
    for (const auto token : tokens) {
      std::uint64_t v = 0;
      const auto r = std::from_chars(token.data(), token.data() + token.size(), v);
      if (token.empty() || token.front() == '-' || r.ec != std::errc() || r.ptr != token.data() + token.size()) return bad();
      if (s->length && *s->length != v) return bad();
      s->length = v;
      --unprocessed;
    }
    if (unprocessed != 0) bad();
  }

  // Not after a Content-Length or a Transfer-Encoding ending in chunked.
  void transfer_encoding_line(std::string_view value) noexcept {
    if (s->chunked || s->length) {
      s->line_error = LineError::on_transfer_encoding;
      return;
    }
    const bhttp::token_list list{value};
    auto it = std::find_if(list.begin(), list.end(), [](auto c) { return iequals(c, "chunked"); });
    s->chunked = it != list.end() && ++it == list.end();
  }
};

namespace {

// RFC 9110 §7.6.1: the fields a Connection option names are hop-by-hop too, except those that
// must survive whatever the client says (connection_may_drop()).
void mark_connection_options(HeadIndex& x, std::span<IndexedField> fields) {
  x.for_each(KnownField::connection, [&](const IndexedField& line) {
    // "keep-alive" names a field that is hop-by-hop already, "close" none.
    if (is_option(x.value(line), "keep-alive") || is_option(x.value(line), "close")) return;
    for_each_option(x.value(line), [&](std::string_view option) {
      if (iequals(option, "close") || !connection_may_drop(option)) return;
      for (auto& f : fields)
        if (!f.hop_by_hop && f.name_size == option.size() && iequals(x.name(f), option)) f.hop_by_hop = true;
    });
  });
}

detail::FramingFacts framing_of(const HeadIndex& x) noexcept {
  return {x.count(KnownField::transfer_encoding), x.count(KnownField::content_length),
          x.value(KnownField::transfer_encoding), x.value(KnownField::content_length)};
}

// What a request whose line failed is refused for: a head with both framing fields for that
// conflict, whichever line failed; else the failed line's own fault.
Violation line_violation(const HeadIndex& x, IndexBuilder::LineError e) noexcept {
  using E = IndexBuilder::LineError;
  if (e == E::connection) return Violation::bad_field_value;
  if (x.count(KnownField::content_length) != 0 && x.count(KnownField::transfer_encoding) != 0)
    return Violation::content_length_with_transfer_encoding;
  return e == E::on_content_length ? Violation::bad_content_length : Violation::bad_transfer_encoding;
}

}  // namespace

// Friend of the index classes: fills them, then applies the rules after the last line.
struct IndexFinisher {
  static Rejection request(RequestHead& r, IndexBuilder::State& s) noexcept {
    const auto reject = [](Violation v) { return Rejection{status_for(v), describe(v)}; };
    if (s.overflow) return reject(Violation::head_too_large);
    if (s.line_error != IndexBuilder::LineError::none) return {400, describe(line_violation(r, s.line_error))};
    const auto hosts = r.count(KnownField::host);
    if (const auto v = detail::check_request_facts(framing_of(r), s.framing_variant, hosts,
                                                   r.value(KnownField::host), r.version_);
        v != Violation::none)
      return reject(v);
    r.chunked_ = s.chunked;
    r.content_length_ = s.length;
    mark_connection_options(r, {r.fields_.data(), r.size_});
    if (hosts != 0) {
      const auto* h = r.find(KnownField::host);
      r.has_host_ = true;
      r.host_at_ = h->value_at;
      r.host_size_ = h->value_size;
    }
    return {};
  }

  // The refusals of a head that parsed, in this order: a declared body over max_body_bytes (413,
  // before the client sends it), CONNECT (501: a tunnel, RFC 9110 §9.3.6, which a reverse proxy
  // does not offer), a malformed absolute-form target (400). An absolute-form target's authority
  // is the Host (RFC 9112 §3.2.2), so that routing and the origin agree on it.
  static Rejection admit(RequestHead& r, const RequestLimits& limits) noexcept {
    if (r.content_length_ && limits.max_body_bytes != 0 && *r.content_length_ > limits.max_body_bytes)
      return {413, "body too large"};
    if (r.verb_ == bhttp::verb::connect) return {501, "method not supported"};
    const auto abs = target_authority(r.target());
    if (abs.form == TargetAuthority::Form::bad) return {400, "bad target"};
    if (abs.form == TargetAuthority::Form::ok) {
      r.has_host_ = r.host_from_target_ = true;
      r.host_at_ = static_cast<std::uint32_t>(abs.authority.data() - r.bytes_.data());
      r.host_size_ = static_cast<std::uint32_t>(abs.authority.size());
    }
    return {};
  }

  static bool response(ResponseHead& r, IndexBuilder::State& s) noexcept {
    if (s.overflow || s.line_error != IndexBuilder::LineError::none) return false;
    if (detail::check_framing(framing_of(r), r.version_, false) != Violation::none) return false;
    r.chunked_ = s.chunked;
    r.content_length_ = s.length;
    mark_connection_options(r, {r.fields_.data(), r.size_});
    return true;
  }

  static void reset(HeadIndex& x, std::string_view bytes) noexcept {
    x.bytes_ = bytes;
    x.size_ = 0;
    x.count_.fill(0);
    x.content_length_.reset();
    x.chunked_ = x.close_ = x.keep_alive_option_ = x.upgrade_option_ = false;
  }

  static void reset(RequestHead& r, std::string_view bytes) noexcept {
    reset(static_cast<HeadIndex&>(r), bytes);
    r.has_host_ = r.host_from_target_ = false;
  }

  static void cover(HeadIndex& x, std::size_t head_size) noexcept { x.bytes_ = x.bytes_.substr(0, head_size); }
};

HeadVerdict index_request_head(std::string_view bytes, const RequestLimits& limits, RequestHead& out) noexcept {
  HeadVerdict v;
  v.head_start = empty_lines_before(bytes);
  const auto rest = bytes.substr(v.head_start);
  IndexFinisher::reset(out, rest);
  IndexBuilder::State state{&out, &out, nullptr, rest.data()};
  const auto scan = detail::HeadScanner<IndexBuilder>{rest, limits.max_header_bytes, IndexBuilder{&state}}
                        .request(limits.max_uri_bytes);
  v.result = scan.result;
  if (scan.result == HeadScan::Result::invalid) {
    v.rejection = {status_for(scan.violation), describe(scan.violation)};
  } else if (scan.result == HeadScan::Result::complete) {
    v.head_size = scan.head_size;
    IndexFinisher::cover(out, scan.head_size);
    v.rejection = IndexFinisher::request(out, state);
    if (!v.rejection) {
      v.rejection = IndexFinisher::admit(out, limits);
      v.admission = static_cast<bool>(v.rejection);
    }
    if (v.rejection) v.result = HeadScan::Result::invalid;
  }
  return v;
}

HeadVerdict index_response_head(std::string_view bytes, std::size_t max_header_bytes, ResponseHead& out) noexcept {
  HeadVerdict v;
  IndexFinisher::reset(out, bytes);
  IndexBuilder::State state{&out, nullptr, &out, bytes.data()};
  const auto scan = detail::HeadScanner<IndexBuilder>{bytes, max_header_bytes, IndexBuilder{&state}}.response();
  v.result = scan.result;
  if (scan.result == HeadScan::Result::complete) {
    v.head_size = scan.head_size;
    IndexFinisher::cover(out, scan.head_size);
    if (!IndexFinisher::response(out, state)) v.result = HeadScan::Result::invalid;
  }
  if (v.result == HeadScan::Result::invalid) v.rejection = {502, "bad response"};
  return v;
}

std::string_view choose_request_id(const RequestHead& req, RequestIdGenerator& gen, char (&storage)[37]) {
  // The client's own, when it sent exactly one line and that is sane.
  if (req.count(KnownField::x_request_id) == 1) {
    const auto id = req.value(KnownField::x_request_id);
    if (sane_request_id(id)) return id;
  }
  return gen.next(storage);
}

namespace {

// Calls f(protocol) for each element of the Upgrade lines, in order.
template <class F>
void for_each_protocol(const HeadIndex& x, F&& f) {
  bool go = true;
  x.for_each(KnownField::upgrade, [&](const IndexedField& line) {
    if (go) go = for_each_list_element(x.value(line), f);
  });
}

}  // namespace

bool wants_upgrade(const RequestHead& req, bool has_body) noexcept {
  if (req.version() != 11 || req.verb() != bhttp::verb::get || has_body || !req.connection_upgrade()) return false;
  bool any = false;
  for_each_protocol(req, [&](std::string_view p) {
    any = !is_h2c(p);
    return !any;
  });
  return any;
}

ResponsePlan plan_response(const ResponseHead& res, bool is_head, unsigned client_version,
                           bool client_keep_alive) noexcept {
  return detail::plan_response(res.status(), res.chunked(), res.content_length().has_value(),
                               res.value(KnownField::transfer_encoding), is_head, client_version,
                               client_keep_alive);
}

// ---- splicing ----------------------------------------------------------------------------------

namespace {

using detail::HeadOut;
constexpr std::string_view crlf = "\r\n";

// Copies the kept field lines to `out`: a line already in the form we write ("Name: value" with
// nothing around the value) joins the run of such lines before it and they leave in one copy;
// any other is written as "name: value".
class LineWriter {
public:
  LineWriter(HeadOut& out, const HeadIndex& x) noexcept : out_(out), x_(x), b_(x.bytes().data()) {}

  void keep(const IndexedField& f) {
    const std::size_t name_end = f.name_at + f.name_size;
    const std::size_t value_end = std::size_t{f.value_at} + f.value_size;
    const bool canonical = f.value_at == name_end + 2 && b_[name_end + 1] == ' ' && b_[value_end] == '\r';
    if (canonical && run_end_ == f.name_at && run_end_ != 0) {
      run_end_ = value_end + 2;
      return;
    }
    flush();
    if (canonical) {
      run_start_ = f.name_at;
      run_end_ = value_end + 2;
      return;
    }
    line(x_.name(f), x_.value(f));
  }

  // A line of ours whose value is `prefix` then `value`.
  void line(std::string_view name, std::string_view prefix, std::string_view value) {
    flush();
    const auto n = name.size() + prefix.size() + value.size() + 4;
    char* p = out_.room(n);
    detail::copy_piece(p, name.data(), name.size());
    p += name.size();
    p[0] = ':';
    p[1] = ' ';
    detail::copy_piece(p + 2, prefix.data(), prefix.size());
    p += 2 + prefix.size();
    detail::copy_piece(p, value.data(), value.size());
    p += value.size();
    p[0] = '\r';
    p[1] = '\n';
    out_.commit(n);
  }

  // A line of ours (not from the head); flushes the run first. Inlined: a name given as a literal
  // is then copied with a few moves.
  [[gnu::always_inline]] void line(std::string_view name, std::string_view value) {
    flush();
    const auto n = name.size() + value.size() + 4;
    char* p = out_.room(n);
    detail::copy_piece(p, name.data(), name.size());
    p += name.size();
    p[0] = ':';
    p[1] = ' ';
    detail::copy_piece(p + 2, value.data(), value.size());
    p += 2 + value.size();
    p[0] = '\r';
    p[1] = '\n';
    out_.commit(n);
  }

  // The head's first `size` bytes (its start line, as we would write it) begin the run that the
  // kept lines after it join.
  void start_line(std::size_t size) noexcept {
    run_start_ = 0;
    run_end_ = size;
  }

  [[gnu::always_inline]] void flush() {
    if (run_end_ != 0) write_run();
  }

private:
  void write_run() {
    out_.append({b_ + run_start_, run_end_ - run_start_});
    run_start_ = run_end_ = 0;
  }

  HeadOut& out_;
  const HeadIndex& x_;
  const char* b_;
  std::size_t run_start_ = 0;
  std::size_t run_end_ = 0;  // 0: no run (a field line never starts at offset 0)
};

bool dropped_by(const HeaderRules* rules, std::string_view name) noexcept {
  return rules != nullptr && rules->drops(name);
}

void append_rules(HeadOut& out, const HeaderRules* rules, const Variables* vars) {
  if (rules != nullptr) out.with_string([&](std::string& s) { rules->append(s, *vars); });
}

// One element appended to list field `name`: its kept lines' values joined by ", ", then the
// parts (rewrite.cpp's append_hop()), written straight to `out`.
template <class Parts>
void append_hop_line(HeadOut& out, const HeadIndex& x, KnownField k, std::string_view name, const Parts& parts) {
  const auto at = out.size();
  out.append(name);
  out.append(": ");
  const auto start = out.size();
  x.for_each(k, [&](const IndexedField& f) {
    if (f.hop_by_hop || f.value_size == 0) return;
    if (out.size() != start) out.append(", ");
    out.append(x.value(f));
  });
  if (std::any_of(std::begin(parts), std::end(parts), [](std::string_view p) { return !p.empty(); })) {
    if (out.size() != start) out.append(", ");
    for (const auto p : parts) out.append(p);
  }
  if (out.size() == start) {
    out.cut(at);  // nothing to say: no line (append_hop erases the field)
    return;
  }
  out.append(crlf);
}

void append_upgrade(LineWriter& w, HeadOut& out, const HeadIndex& x, const HeaderRules* rules,
                    bool skip_h2c) {
  w.flush();
  const auto at = out.size();
  out.append("Upgrade: ");
  const auto start = out.size();
  for_each_protocol(x, [&](std::string_view p) {
    if (skip_h2c && is_h2c(p)) return true;
    if (out.size() != start) out.append(", ");
    out.append(p);
    return true;
  });
  if (out.size() == start) return out.cut(at);
  if (dropped_by(rules, "Upgrade")) out.cut(at);
  else out.append(crlf);
  if (!dropped_by(rules, "Connection")) w.line("Connection", "upgrade");
}

void append_forwarded(HeadOut& out, const RequestHead& req, const ForwardedFor& info) {
  // RFC 7239 §4, §6: an IPv6 node is "[v6]" in a quoted string; Host is quoted as it may hold a
  // ':' (not a token character).
  const bool v6 = info.client_ip.find(':') != std::string_view::npos;
  const auto host = req.has_host() ? req.host() : std::string_view();
  const bool with_host = !host.empty() && host.find_first_of("\"\\") == std::string_view::npos;
  const std::string_view parts[] = {"for=", v6 ? "\"[" : "", info.client_ip, v6 ? "]\"" : "",
                                    with_host ? ";host=\"" : "", with_host ? host : "",
                                    with_host ? "\"" : "", ";proto=", info.proto};
  append_hop_line(out, req, KnownField::forwarded, "Forwarded", parts);
}

// The request line (as append_request_line() in head.cpp) through the cursor; a rewritten path
// takes the string's way.
// An HTTP/1.1 request line with a Host is the client's own bytes: the LineWriter's first run.
void append_request_line(LineWriter& w, HeadOut& out, const RequestHead& req, const PathRewrite* path) {
  if (path == nullptr && req.version() == 11 && req.has_host()) {
    // "METHOD SP target SP HTTP/1.1 CRLF", single spaces (the scan's rule), from offset 0.
    w.start_line(req.request_line_size());
    return;
  }
  if (path != nullptr) {
    out.with_string([&](std::string& s) { append_request_line(s, req.method(), req.target(), path, req.has_host()); });
    return;
  }
  out.append(req.method());
  out.push_back(' ');
  out.append(req.target());
  out.append(" HTTP/1.1\r\n");
  if (!req.has_host()) out.append("Host: \r\n");
}

bool request_drops(const RequestHead& req, const IndexedField& f, bool forwarded, bool expect,
                   bool own_length) noexcept {
  switch (f.known) {
    case KnownField::content_length: return own_length;
    case KnownField::expect: return expect || f.hop_by_hop;
    case KnownField::x_forwarded_for:
    case KnownField::x_forwarded_proto:
    case KnownField::x_forwarded_host:
    case KnownField::x_request_id: return true;
    case KnownField::forwarded: return forwarded || f.hop_by_hop;
    case KnownField::host: return req.host_from_target();
    default: return f.hop_by_hop;
  }
}

}  // namespace

// What the splices add to a head, typically (X-Forwarded-*, X-Request-Id, Connection): room made
// with the head's own size, so that the writer takes one step, not one per line.
constexpr std::size_t splice_headroom = 256;

void splice_request_head(std::string& s, const RequestHead& req, const RequestSplice& e) {
  HeadOut out(s, req.byte_size() + splice_headroom);
  const auto& info = e.forwarded;
  // An absolute-form target's authority is the Host (RFC 9112 §3.2.2).
  LineWriter w(out, req);
  append_request_line(w, out, req, e.path);
  if (req.host_from_target() && !dropped_by(e.rules, "Host")) w.line("Host", req.host());
  // Expect is answered hop by hop (the session sends 100 Continue), not forwarded, when its first
  // line says something.
  const bool expect = !req.value(KnownField::expect).empty();
  for (const auto& f : req.fields()) {
    if (!request_drops(req, f, info.forwarded, expect, e.content_length.has_value()) &&
        !dropped_by(e.rules, req.name(f)))
      w.keep(f);
  }
  if (info.upgrade) append_upgrade(w, out, req, e.rules, true);
  w.flush();
  const std::string_view ip[] = {info.client_ip};
  if (!dropped_by(e.rules, "X-Forwarded-For")) {
    // The client's address alone, when the request has no X-Forwarded-For of its own.
    if (req.count(KnownField::x_forwarded_for) == 0 && !info.client_ip.empty()) w.line("X-Forwarded-For", info.client_ip);
    else append_hop_line(out, req, KnownField::x_forwarded_for, "X-Forwarded-For", ip);
  }
  if (info.forwarded && !dropped_by(e.rules, "Forwarded")) append_forwarded(out, req, info);
  if (!dropped_by(e.rules, "X-Forwarded-Proto")) w.line("X-Forwarded-Proto", info.proto);
  if (req.has_host() && !dropped_by(e.rules, "X-Forwarded-Host")) w.line("X-Forwarded-Host", req.host());
  if (!info.request_id.empty() && !dropped_by(e.rules, "X-Request-Id")) w.line("X-Request-Id", info.request_id);
  if (e.content_length && !dropped_by(e.rules, "Content-Length")) {
    char length[24];
    const auto r = std::to_chars(length, length + sizeof length, *e.content_length);
    w.line("Content-Length", std::string_view(length, static_cast<std::size_t>(r.ptr - length)));
  }
  append_rules(out, e.rules, e.vars);
  if (e.chunked) out.append("Transfer-Encoding: chunked\r\n");
  out.append(crlf);
}

namespace {

// A status line without a reason phrase gets the registered one (RFC 9110 §15), a 101 after an
// upgrade "Switching Protocols". An HTTP/1.1 status line with a reason is the origin's own bytes:
// the LineWriter's first run.
void append_status_line(LineWriter& w, HeadOut& out, const ResponseHead& res, bool switching) {
  if (res.version() == 11 && !res.reason().empty()) {
    // "HTTP/1.1 SP 3DIGIT SP reason CRLF" (the scan's rule), from offset 0.
    w.start_line(res.status_line_size());
    return;
  }
  const auto status = res.status();  // 100..599: the scan refused anything else
  const char line[] = {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', static_cast<char>('0' + status / 100),
                       static_cast<char>('0' + status / 10 % 10), static_cast<char>('0' + status % 10), ' '};
  out.append({line, sizeof line});
  if (!res.reason().empty()) out.append(res.reason());
  else if (switching) out.append("Switching Protocols");
  else out.append(bhttp::obsolete_reason(bhttp::int_to_status(res.status())));
  out.append(crlf);
}

// The lines after the fields of a final head: the framing towards the client, Sluice-Attempts,
// and Connection as the plan says.
void append_final_lines(HeadOut& out, const ResponseSplice& e, bool codings) {
  append_rules(out, e.rules, e.vars);
  if (e.plan.chunked_out && !codings) out.append("Transfer-Encoding: chunked\r\n");
  if (e.attempts > 1) {
    out.append("Sluice-Attempts: ");
    out.push_back(static_cast<char>('0' + std::min(e.attempts, 9u)));
    out.append(crlf);
  }
  if (!e.plan.keep_alive) out.append("Connection: close\r\n");
  else if (e.client_version == 10) out.append("Connection: keep-alive\r\n");
}

// A field the proxy's content coding replaces (ResponseSplice::content_encoding): Content-Length
// and Accept-Ranges go; a strong first ETag is written weakened. True when `f` was handled here.
bool coded_field(LineWriter& w, const ResponseHead& res, const IndexedField& f, const ResponseSplice& e,
                 bool& etag_seen) {
  if (e.drop_length && f.known == KnownField::content_length) return true;
  if (f.known != KnownField::unknown) return false;
  const auto name = res.name(f);
  if (e.drop_accept_ranges && iequals(name, "Accept-Ranges")) return true;
  if (!e.weaken_etag || etag_seen || !iequals(name, "ETag")) return false;
  etag_seen = true;
  const auto value = res.value(f);
  if (value.starts_with("W/")) return false;
  w.line(name, "W/", value);
  return true;
}

}  // namespace

void splice_response_head(std::string& s, const ResponseHead& res, const ResponseSplice& e) {
  HeadOut out(s, res.byte_size() + splice_headroom);
  using Kind = ResponseSplice::Kind;
  const auto status = res.status();
  // What an origin may not pass on through us (not on the tunnel's 101): no Sluice-* (only
  // sluice speaks as sluice), no framing fields on a 1xx, 204 or 304 (which have no body).
  const bool claims = e.kind != Kind::switching;
  const bool no_framing = claims && (status < 200 || status == 204 || status == 304);
  // Codings before the final chunked stay in Transfer-Encoding: the body is relayed as coded,
  // re-chunked, and they describe it.
  const auto te = res.value(KnownField::transfer_encoding);
  const bool codings = e.kind != Kind::interim && !no_framing && has_codings_before_chunked(te);
  const bool own_id = e.kind != Kind::interim;  // X-Request-Id is ours, not the origin's
  LineWriter w(out, res);
  append_status_line(w, out, res, e.kind == Kind::switching);
  const bool coded = e.drop_length || e.drop_accept_ranges || e.weaken_etag;
  bool etag_seen = false;
  for (const auto& f : res.fields()) {
    const bool drop = f.hop_by_hop || (own_id && f.known == KnownField::x_request_id) ||
                      (claims && f.known == KnownField::sluice) ||
                      (no_framing && f.known == KnownField::content_length);
    if (drop || dropped_by(e.rules, res.name(f)) || (coded && coded_field(w, res, f, e, etag_seen))) continue;
    w.keep(f);
  }
  if (!e.content_encoding.empty()) w.line("Content-Encoding", e.content_encoding);
  if (e.add_vary) w.line("Vary", "Accept-Encoding");
  if (e.kind == Kind::switching) append_upgrade(w, out, res, e.rules, false);
  if (codings && !dropped_by(e.rules, "Transfer-Encoding")) w.line("Transfer-Encoding", te);
  if (own_id && !e.request_id.empty() && !dropped_by(e.rules, "X-Request-Id")) w.line("X-Request-Id", e.request_id);
  // RFC 9110 §6.6.1: a recipient with a clock adds the Date an answer came without; an origin's
  // own Date is kept as it is.
  if (e.kind != Kind::interim && !e.date.empty() && res.count(KnownField::date) == 0 && !dropped_by(e.rules, "Date"))
    w.line("Date", e.date);
  w.flush();
  if (e.kind == Kind::final_head) append_final_lines(out, e, codings);
  out.append(crlf);
}

// Every protocol of the 101's Upgrade must be one the request offered.
bool valid_switch(const ResponseHead& res, const RequestHead& req) noexcept {
  bool any = false;
  bool all_offered = true;
  for_each_protocol(res, [&](std::string_view chosen) {
    any = true;
    all_offered = false;
    for_each_protocol(req, [&](std::string_view p) {
      all_offered = iequals(chosen, p);
      return !all_offered;
    });
    return all_offered;
  });
  return any && all_offered;
}

}  // namespace sluice::http
