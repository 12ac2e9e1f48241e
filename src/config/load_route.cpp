// [[route]]: which requests go where, and the edge rules applied on the way (docs/edge.md). All
// live: the snapshot built from the new config compiles them, and the next request uses it.
#include <algorithm>
#include <charconv>

#include "reader.hpp"
#include "sluice/http/chars.hpp"
#include "sluice/http/edge_rules.hpp"

namespace sluice::config {

namespace route_section {

using R = RouteConfig;

using L = RateLimitConfig;
using A = ReturnConfig;

std::string return_text(const std::optional<A>& answer) {
  if (!answer) return {};
  return "{ status = " + std::to_string(answer->status) + ", location = " + toml_string(answer->location) +
         ", body = " + toml_string(answer->body) + ", content_type = " + toml_string(answer->content_type) + " }";
}

// A rule that a template parses as `kind`; "" when the value is empty.
template <std::string A::*M, http::TemplateText Kind>
std::string template_problem(const void* answer) {
  std::string why;
  const std::string& text = static_cast<const A*>(answer)->*M;
  return http::Template::parse(text, Kind, &why) ? "" : why;
}

const KeySpec return_rows[] = {
    integer_key<&A::status>("status", 200, 599, "The status answered.")
        .hint("; a 1xx is an interim answer, not a final one")
        .needed("the status to answer with")
        .rule([](const void* a) -> std::string {
          const auto& ret = *static_cast<const A*>(a);
          if (ret.status < 300 || ret.status >= 400 || !ret.location.empty()) return {};
          return "a " + std::to_string(ret.status) + " answer needs a location";
        }),
    string_key<&A::location>("location", "Location of a 3xx (a template).")
        .rule(template_problem<&A::location, http::TemplateText::uri>),
    string_key<&A::body>("body", "The body (a template).").rule([](const void* a) -> std::string {
      const auto& ret = *static_cast<const A*>(a);
      if (auto why = template_problem<&A::body, http::TemplateText::body>(a); !why.empty()) return why;
      if (ret.body.empty() || (ret.status != 204 && ret.status != 304)) return {};
      return "a " + std::to_string(ret.status) + " answer has no body (RFC 9110 §15.3.5, §15.4.5)";
    }),
    string_key<&A::content_type>("content_type", "The body's media type.").rule([](const void* a) -> std::string {
      const auto& type = static_cast<const A*>(a)->content_type;
      if (!type.empty() && template_problem<&A::content_type, http::TemplateText::field_value>(a).empty() &&
          type.find('$') == std::string::npos)
        return {};
      return "must be a media type like \"text/html; charset=utf-8\" (no variables)";
    }),
};

// "100/s", "20/m", "1000/h".
bool parse_rate(std::string_view text, RateLimitConfig& out) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  std::uint64_t n = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + slash, n);
  if (err != std::errc() || end != text.data() + slash || n < 1 || n > 1'000'000) return false;
  const auto unit = text.substr(slash + 1);
  if (unit == "s") out.period = std::chrono::seconds(1);
  else if (unit == "m") out.period = std::chrono::minutes(1);
  else if (unit == "h") out.period = std::chrono::hours(1);
  else return false;
  out.count = n;
  return true;
}

void read_rate(Reader& r, const toml::node& node, const std::string& path, void* limit) {
  std::string rate;
  if (r.take_string(node, path, rate, "a string like \"100/s\"") && !parse_rate(rate, *static_cast<L*>(limit)))
    r.error(node, path, "expected COUNT/s, COUNT/m or COUNT/h with COUNT 1..1000000, got '" + rate + "'");
}

void read_limit_key(Reader& r, const toml::node& node, const std::string& path, HashKeySpec& out) {
  using Kind = HashKeySpec::Kind;
  std::string text;
  if (!r.take_string(node, path, text)) return;
  const auto spec = HashKeySpec::parse(text);
  if (spec && (spec->kind == Kind::client_ip || (spec->kind == Kind::header && http::is_token(spec->name))))
    out = *spec;
  else
    r.error(node, path, "unknown key '" + text + "'; expected client_ip or header:NAME");
}

const KeySpec rate_limit_rows[] = {
    custom_key<&L::count>("rate", read_rate, nullptr, "COUNT/s, COUNT/m or COUNT/h.")
        .needed("requests per unit, like \"100/s\"")
        .docs("string"),
    integer_key<&L::burst>("burst", 1, 10'000'000, "Requests at once; default: the count."),
    value_key<&L::key, read_limit_key>("key", "client_ip or header:NAME.").docs("string"),
    integer_key<&L::max_keys>("max_keys", 16, 16'777'216, "Keys remembered (least recent evicted)."),
};

void read_rate_limit(Reader& r, const toml::node& node, const std::string& path, std::optional<L>& out) {
  const toml::table* table = node.as_table();
  if (table == nullptr)
    return r.type_error(node, path, "a table like { rate = \"100/s\", burst = 200, key = \"client_ip\" }");
  const std::size_t errors = r.error_count();
  L limit;
  const Read read = r.walk(*table, path, rate_limit_rows, &limit);
  if (!read.present<&L::burst>()) limit.burst = static_cast<std::uint32_t>(std::min<std::uint64_t>(limit.count, 10'000'000));
  if (r.error_count() == errors) out = limit;
}

// return = { status = 301, location = "https://$host$request_uri" } | { status = 503, body = "..." }
void read_return(Reader& r, const toml::node& node, const std::string& path, std::optional<A>& out) {
  const toml::table* table = node.as_table();
  if (table == nullptr)
    return r.type_error(node, path, "a table like { status = 301, location = \"https://$host$request_uri\" }");
  A answer;
  r.walk(*table, path, return_rows, &answer);
  out = std::move(answer);
}

void read_host(Reader& r, const toml::node& node, const std::string& path, std::string& out) {
  std::string host;
  if (!r.take_string(node, path, host)) return;
  if (auto pattern = normalize_host_pattern(host)) out = std::move(*pattern);
  else
    r.error(node, path, "invalid host pattern '" + host + "'; expected a name like \"api.example.com\" or \"*.example.com\"");
}

// The match, upstream and admission are the route's summary line in `check --diff`.
const KeySpec route_rows[] = {
    value_key<&R::host, read_host, quoted>("host", "Host to match: exact or \"*.example.com\"; \"\" = any.")
        .summary()
        .docs("string"),
    string_key<&R::path_prefix>("path_prefix", "Path prefix to match; the longest wins.")
        .rule([](const void* r) -> std::string {
          const auto& prefix = static_cast<const R*>(r)->path_prefix;
          if (!prefix.starts_with('/')) return "must start with '/', got '" + prefix + "'";
          if (prefix.find_first_of("?# \t\r\n") != std::string::npos) return "must not contain '?', '#' or whitespace";
          return {};
        })
        .summary(),
    string_key<&R::upstream>("upstream", "The upstream this route sends to.").summary(),
    value_key<&R::request_headers, parse_header_rules, header_rules_text>(
        "request_headers", "Header rules on the request (after the upstream's)."),
    value_key<&R::response_headers, parse_header_rules, header_rules_text>("response_headers",
                                                                           "Header rules on the response."),
    bool_key<&R::strip_prefix>("strip_prefix", "path_prefix removed before forwarding."),
    bool_key<&R::require_client_cert>("require_client_cert", "Only clients with a verified TLS certificate (403 else)."),
    string_key<&R::rewrite_prefix>("rewrite_prefix", "Replaces path_prefix before forwarding.")
        .rule([](const void* object) -> std::string {
          const auto& r = *static_cast<const R*>(object);
          const auto& w = r.rewrite_prefix;
          const bool visible = std::all_of(w.begin(), w.end(), [](char c) { return c > 0x20 && c < 0x7f; });
          if (!w.starts_with('/') || !visible || w.find_first_of("?#") != std::string::npos)
            return "must start with '/' and hold no '?', '#', spaces or control characters, got '" + w + "'";
          if (r.strip_prefix)
            return "strip_prefix and rewrite_prefix exclude each other (strip_prefix = true is rewrite_prefix = \"/\")";
          return {};
        }),
    value_key<&R::answer, read_return, return_text>("return",
                                                     "Answer without an upstream: { status, location, body, content_type }."),
    value_key<&R::compress, read_route_compress, route_compress_text>(
        "compress", "Response compression, replacing the upstream's; false = none."),
    value_key<&R::allow, parse_cidrs, cidrs_text>("allow", "Only these clients (when not empty).")
        .summary()
        .docs("array of strings"),
    value_key<&R::deny, parse_cidrs, cidrs_text>("deny", "Refused clients (before allow).")
        .summary()
        .docs("array of strings"),
    value_key<&R::rate_limit, read_rate_limit>("rate_limit", "{ rate = \"100/s\", burst, key, max_keys }."),
    value_key<&R::error_pages, parse_error_pages, error_pages_text>("error_pages",
                                                                    "Bodies of sluice's own answers for this route."),
};

// A route that answers itself forwards nothing, so the keys about forwarding are refused there
// rather than silently ignored.
template <auto M>
void refuse_forwarding(Reader& r, const Read& read) {
  const std::string path = read.path<M>();
  if (read.present<M>())
    r.error(read.where<M>(), path,
            "a route with return answers itself and forwards nothing; remove " + path.substr(path.rfind('.') + 1));
}

RouteConfig read_route(Reader& r, const toml::table& table, const std::string& path) {
  RouteConfig route;
  route.where = location_of(table);
  const Read read = r.walk(table, path, route_rows, &route);
  if (read.present<&R::answer>()) {
    refuse_forwarding<&R::upstream>(r, read);
    refuse_forwarding<&R::strip_prefix>(r, read);
    refuse_forwarding<&R::rewrite_prefix>(r, read);
    refuse_forwarding<&R::request_headers>(r, read);
    refuse_forwarding<&R::compress>(r, read);
    r.route_upstreams.emplace_back(nullptr, std::string());  // answers itself: no upstream
  } else {
    if (!read.present<&R::upstream>()) r.missing(table, read.path<&R::upstream>(), "the upstream this route sends to");
    r.route_upstreams.emplace_back(read.at<&R::upstream>(), read.path<&R::upstream>());
  }
  r.record(table, path, route_rows, &route);
  return route;
}

}  // namespace route_section

const KeyTable route_table = route_section::route_rows;

bool in_route_summary(std::string_view key) {
  for (const auto& k : route_section::route_rows)
    if (k.name == key) return k.in_summary;
  return false;
}

std::string admission_text(const RouteConfig& r) {
  using namespace route_section;
  std::string out;
  const auto list = [&](std::string_view name, const CidrSet& set) {
    if (set.empty()) return;
    out += (out.empty() ? " (" : ", ") + std::string(name);
    for (const auto& c : set) out += " " + c.to_string();
  };
  list(name_in<&R::allow>(route_rows), r.allow);
  list(name_in<&R::deny>(route_rows), r.deny);
  if (const auto& l = r.rate_limit) {
    out += (out.empty() ? " (" : ", ") + std::string(name_in<&L::count>(rate_limit_rows)) + " " +
           std::to_string(l->count) + "/" + std::to_string(l->period.count()) + "ms " +
           std::string(name_in<&L::burst>(rate_limit_rows)) + " " + std::to_string(l->burst) + " " +
           std::string(name_in<&L::key>(rate_limit_rows)) + " " + l->key.to_string();
  }
  return out.empty() ? out : out + ")";
}

void read_routes(Reader& r, const toml::node& node, const std::string& path, std::vector<RouteConfig>& out) {
  // (host, path_prefix) -> the route that claimed it first.
  std::unordered_map<std::string, std::string> seen;
  read_tables(r, node, path, "an array of tables ([[route]])", "a table", [&](const toml::table& table, const std::string& p) {
    RouteConfig route = route_section::read_route(r, table, p);
    r.answers_only = (out.empty() || r.answers_only) && r.route_upstreams.back().second.empty();
    const auto [it, inserted] = seen.try_emplace(route.host + '\n' + route.path_prefix, p);
    if (!inserted) r.error(table, p, "duplicate route: same host and path_prefix as " + it->second);
    out.push_back(std::move(route));
  });
}

}  // namespace sluice::config
