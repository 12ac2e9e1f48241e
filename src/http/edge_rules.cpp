#include "sluice/http/edge_rules.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>

#include <boost/beast/http/status.hpp>

#include "sluice/http/chars.hpp"
#include "sluice/http/head.hpp"

namespace sluice::http {

namespace {

constexpr std::array<std::string_view, variable_count> variable_names{
    "request_id", "host", "client_ip", "upstream", "server", "config_version", "request_uri",
    "client_cert_subject", "client_cert_san", "client_cert_fingerprint", "client_cert_verify"};

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// Case-insensitive; `lowercase` is already lower case.
bool iequals_lower(std::string_view text, std::string_view lowercase) noexcept {
  if (text.size() != lowercase.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (lower(text[i]) != lowercase[i]) return false;
  return true;
}

std::string lowercased(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = lower(c);
  return out;
}

bool allowed(unsigned char c, TemplateText kind) noexcept {
  switch (kind) {
    case TemplateText::field_value: return chars::is(c, chars::k_field);
    case TemplateText::uri: return chars::is(c, chars::k_vchar);
    case TemplateText::body: return true;
  }
  return false;
}

bool variable_char(char c) noexcept { return (c >= 'a' && c <= 'z') || c == '_'; }

}  // namespace

// ---- Template ---------------------------------------------------------------------------------

std::optional<Template> Template::parse(std::string_view text, TemplateText kind, std::string* why) {
  if (kind == TemplateText::field_value && !text.empty() &&
      (chars::is_ows(static_cast<unsigned char>(text.front())) ||
       chars::is_ows(static_cast<unsigned char>(text.back())))) {
    *why = "a header value may not start or end with a space or tab (RFC 9110 §5.5)";
    return std::nullopt;
  }
  Template t;
  const auto literal = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (!t.pieces_.empty() && t.pieces_.back().variable < 0) {
      t.pieces_.back().length += static_cast<std::uint32_t>(piece.size());
    } else {
      t.pieces_.push_back({static_cast<std::uint32_t>(t.literal_.size()),
                           static_cast<std::uint32_t>(piece.size()), -1});
    }
    t.literal_.append(piece);
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c != '$') {
      if (!allowed(c, kind)) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", c);
        *why = std::string("byte ") + hex + " at offset " + std::to_string(i) + " is not allowed " +
               (kind == TemplateText::uri ? "in a URI" : "in a header value");
        return std::nullopt;
      }
      literal(text.substr(i, 1));
      ++i;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {  // "$$": a literal '$'
      literal("$");
      i += 2;
      continue;
    }
    // "$name" takes the longest run of [a-z_]; "${name}" ends at the brace.
    const bool braced = i + 1 < text.size() && text[i + 1] == '{';
    std::size_t begin = i + (braced ? 2 : 1), end = begin;
    while (end < text.size() && variable_char(text[end])) ++end;
    const auto name = text.substr(begin, end - begin);
    if (braced && (end >= text.size() || text[end] != '}')) {
      *why = "unterminated '${' at offset " + std::to_string(i);
      return std::nullopt;
    }
    const auto it = std::find(variable_names.begin(), variable_names.end(), name);
    if (it == variable_names.end()) {
      std::string known;
      for (const auto n : variable_names) known += (known.empty() ? "$" : ", $") + std::string(n);
      *why = "unknown variable '$" + std::string(name) + "' (known: " + known + "; '$$' is a '$')";
      return std::nullopt;
    }
    t.pieces_.push_back({0, 0, static_cast<std::int8_t>(it - variable_names.begin())});
    i = end + (braced ? 1 : 0);
  }
  return t;
}

std::size_t Template::size(const Variables& vars) const noexcept {
  std::size_t n = 0;
  for (const auto& p : pieces_)
    n += p.variable < 0 ? p.length : vars.values[static_cast<std::size_t>(p.variable)].size();
  return n;
}

void Template::append(std::string& out, const Variables& vars) const {
  for (const auto& p : pieces_) {
    if (p.variable < 0) {
      out.append(literal_, p.offset, p.length);
    } else {
      out.append(vars.values[static_cast<std::size_t>(p.variable)]);
    }
  }
}

// ---- names ------------------------------------------------------------------------------------

bool is_token(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return chars::is(c, chars::k_tchar); });
}

std::optional<std::string_view> reserved_header(std::string_view name) noexcept {
  struct Reserved {
    std::string_view name, why;
  };
  static constexpr std::array<Reserved, 11> reserved{{
      {"content-length", "frames the message (RFC 9112 §6.2)"},
      {"transfer-encoding", "frames the message (RFC 9112 §6.1)"},
      {"connection", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"keep-alive", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"proxy-connection", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"te", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"trailer", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"upgrade", "is hop-by-hop (RFC 9110 §7.6.1)"},
      {"http2-settings", "is hop-by-hop (RFC 9113 §3.2.1)"},
      {"host", "routes the request (RFC 9110 §7.2)"},
      {"expect", "is answered by sluice itself (100-continue)"},
  }};
  std::string lowered(name);
  for (auto& c : lowered) c = c == '_' ? '-' : lower(c);
  for (const auto& r : reserved)
    if (lowered == r.name) return r.why;
  if (lowered.starts_with("sluice-")) return "is sluice's own (Sluice-*)";
  return std::nullopt;
}

// ---- HeaderRules ------------------------------------------------------------------------------

void HeaderRules::forget(std::string_view name) {
  std::erase_if(lines_, [&](const Line& l) { return iequals_lower(l.name, lowercased(name)); });
}

void HeaderRules::apply(std::span<const std::string> remove, Pairs set, Pairs add) {
  const auto drop = [&](std::string_view name) {
    forget(name);
    auto lowered = lowercased(name);
    if (std::find(drop_.begin(), drop_.end(), lowered) == drop_.end()) drop_.push_back(std::move(lowered));
  };
  const auto line = [&](const std::pair<std::string, std::string>& rule) {
    std::string why;
    auto value = Template::parse(rule.second, TemplateText::field_value, &why);
    if (!value) throw std::invalid_argument("header rule " + rule.first + ": " + why);
    lines_.push_back({rule.first, std::move(*value)});
  };
  for (const auto& name : remove) drop(name);
  for (const auto& rule : set) {
    drop(rule.first);
    line(rule);
  }
  for (const auto& rule : add) line(rule);
}

bool HeaderRules::drops(std::string_view name) const noexcept {
  for (const auto& d : drop_)
    if (iequals_lower(name, d)) return true;
  return false;
}

void HeaderRules::append(std::string& out, const Variables& vars) const {
  for (const auto& l : lines_) {
    if (l.value.size(vars) == 0) continue;
    out.append(l.name);
    out.append(": ");
    l.value.append(out, vars);
    out.append("\r\n");
  }
}

// ---- paths ------------------------------------------------------------------------------------

void append_rewritten_target(std::string& out, std::string_view target, const PathRewrite& rewrite) {
  auto rest = path_of(target);
  rest.remove_prefix(std::min(rewrite.prefix_length, rest.size()));
  const std::string_view with = rewrite.replacement;
  out.append(with);
  if (rest.empty() || rest.front() == '?') {
    out.append(rest);
    return;
  }
  // Exactly one '/' where the replacement and the rest of the path meet.
  const bool slash_before = !with.empty() && with.back() == '/';
  const bool slash_after = rest.front() == '/';
  if (slash_before && slash_after) rest.remove_prefix(1);
  if (!slash_before && !slash_after) out.push_back('/');
  out.append(rest);
}

std::string_view host_without_port(std::string_view host) noexcept {
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const auto colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

// ---- fixed answers ----------------------------------------------------------------------------

std::size_t append_fixed_answer(std::string& out, const FixedAnswer& answer, const Variables& vars,
                                const HeaderRules* rules, bool keep_alive, bool head_only,
                                unsigned client_version, std::string_view date) {
  namespace bhttp = boost::beast::http;
  char number[24];
  const auto put_number = [&](std::size_t n) {
    const auto r = std::to_chars(number, number + sizeof number, n);
    out.append(number, static_cast<std::size_t>(r.ptr - number));
  };
  out.append("HTTP/1.1 ");
  put_number(answer.status);
  out.push_back(' ');
  out.append(bhttp::obsolete_reason(static_cast<bhttp::status>(answer.status)));
  out.append("\r\n");
  // A response rule that sets or removes one of these fields wins over the answer's own.
  const auto own = [&](std::string_view name) { return rules == nullptr || !rules->drops(name); };
  // RFC 9110 §6.6.1: an origin server with a clock sends Date (here: sluice is the origin).
  if (!date.empty() && own("date")) {
    out.append("Date: ");
    out.append(date);
    out.append("\r\n");
  }
  const auto body_size = answer.body.size(vars);
  if (body_size != 0 && own("content-type")) {
    out.append("Content-Type: ");
    out.append(answer.content_type);
    out.append("\r\n");
  }
  // RFC 9110 §8.6: no Content-Length in a 204; a 304 has none of its own here either.
  if (answer.status != 204 && answer.status != 304) {
    out.append("Content-Length: ");
    put_number(body_size);
    out.append("\r\n");
  }
  if (!answer.location.empty() && own("location")) {
    out.append("Location: ");
    answer.location.append(out, vars);
    out.append("\r\n");
  }
  if (const auto id = vars[Variable::request_id]; !id.empty() && own("x-request-id")) {
    out.append("X-Request-Id: ");
    out.append(id);
    out.append("\r\n");
  }
  if (rules != nullptr) rules->append(out, vars);
  if (!keep_alive) out.append("Connection: close\r\n");
  else if (client_version == 10) out.append("Connection: keep-alive\r\n");
  out.append("\r\n");
  if (!head_only) answer.body.append(out, vars);
  return body_size;
}

}  // namespace sluice::http
