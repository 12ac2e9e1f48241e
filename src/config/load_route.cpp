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

std::string return_text(const void* route) {
  const auto& answer = static_cast<const R*>(route)->answer;
  if (!answer) return {};
  return "{ status = " + std::to_string(answer->status) + ", location = " + toml_string(answer->location) +
         ", body = " + toml_string(answer->body) + ", content_type = " + toml_string(answer->content_type) + " }";
}

const KeySpec route_rows[] = {
    custom_key("host", [](const void* r) { return toml_string(static_cast<const R*>(r)->host); },
               "Host to match: exact or \"*.example.com\"; \"\" = any."),
    string_key<&R::path_prefix>("path_prefix", "Path prefix to match; the longest wins.")
        .rule([](const void* r) -> std::string {
          const auto& prefix = static_cast<const R*>(r)->path_prefix;
          if (!prefix.starts_with('/')) return "must start with '/', got '" + prefix + "'";
          if (prefix.find_first_of("?# \t\r\n") != std::string::npos) return "must not contain '?', '#' or whitespace";
          return {};
        }),
    string_key<&R::upstream>("upstream", "The upstream this route sends to."),
    custom_key("request_headers", [](const void* r) { return header_rules_text(static_cast<const R*>(r)->request_headers); },
               "Header rules on the request (after the upstream's)."),
    custom_key("response_headers", [](const void* r) { return header_rules_text(static_cast<const R*>(r)->response_headers); },
               "Header rules on the response."),
    bool_key<&R::strip_prefix>("strip_prefix", "path_prefix removed before forwarding."),
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
    custom_key("return", return_text, "Answer without an upstream: { status, location, body, content_type }."),
    custom_key(compress_key,
               [](const void* r) -> std::string {
                 const auto& c = static_cast<const R*>(r)->compress;
                 return c ? compress_text(*c) : std::string();
               },
               "Response compression, replacing the upstream's; false = none."),
    custom_key("allow", [](const void* r) { return cidrs_text(static_cast<const R*>(r)->allow); },
               "Only these clients (when not empty)."),
    custom_key("deny", [](const void* r) { return cidrs_text(static_cast<const R*>(r)->deny); },
               "Refused clients (before allow)."),
    custom_key("rate_limit", nullptr, "{ rate = \"100/s\", burst, key, max_keys }."),
    custom_key("error_pages", [](const void* r) { return error_pages_text(static_cast<const R*>(r)->error_pages); },
               "Bodies of sluice's own answers for this route."),
};

const KeySpec return_rows[] = {
    integer_key<&ReturnConfig::status>("status", 200, 599, "The status answered.")
        .hint("; a 1xx is an interim answer, not a final one"),
    string_key<&ReturnConfig::location>("location", "Location of a 3xx (a template)."),
    string_key<&ReturnConfig::body>("body", "The body (a template)."),
    string_key<&ReturnConfig::content_type>("content_type", "The body's media type."),
};

const KeySpec rate_limit_rows[] = {
    custom_key("rate", nullptr, "COUNT/s, COUNT/m or COUNT/h."),
    integer_key<&RateLimitConfig::burst>("burst", 1, 10'000'000, "Requests at once; default: the count."),
    custom_key("key", nullptr, "client_ip or header:NAME."),
    integer_key<&RateLimitConfig::max_keys>("max_keys", 16, 16'777'216, "Keys remembered (least recent evicted)."),
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

void read_rate_limit(Reader& r, const toml::node& node, const std::string& p, RouteConfig& route) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    r.type_error(node, p, "a table like { rate = \"100/s\", burst = 200, key = \"client_ip\" }");
    return;
  }
  const std::size_t errors = r.error_count();
  RateLimitConfig limit;
  r.require(*table, "rate", p, "requests per unit, like \"100/s\"");
  const auto* rate = r.typed<std::string>(*table, "rate", p + ".rate", "a string like \"100/s\"");
  if (rate != nullptr && !parse_rate(rate->get(), limit))
    r.error(*rate, p + ".rate", "expected COUNT/s, COUNT/m or COUNT/h with COUNT 1..1000000, got '" + rate->get() + "'");
  limit.burst = static_cast<std::uint32_t>(std::min<std::uint64_t>(limit.count, 10'000'000));
  const Read read = r.walk(*table, p, rate_limit_rows, &limit);
  std::string key_text;
  if (const auto* key = read["key"]; key != nullptr && r.take_string(*table, "key", p + ".key", key_text)) {
    using Kind = HashKeySpec::Kind;
    const auto spec = HashKeySpec::parse(key_text);
    if (spec && (spec->kind == Kind::client_ip || (spec->kind == Kind::header && http::is_token(spec->name))))
      limit.key = *spec;
    else
      r.error(*key, p + ".key", "unknown key '" + key_text + "'; expected client_ip or header:NAME");
  }
  if (r.error_count() == errors && rate != nullptr) route.rate_limit = limit;
}

// return = { status = 301, location = "https://$host$request_uri" } | { status = 503, body = "..." }
void read_return(Reader& r, const toml::node& node, const std::string& p, RouteConfig& route) {
  const toml::table* t = node.as_table();
  if (t == nullptr) {
    r.type_error(node, p, "a table like { status = 301, location = \"https://$host$request_uri\" }");
    return;
  }
  ReturnConfig ret;
  r.require(*t, "status", p, "the status to answer with");
  const Read read = r.walk(*t, p, return_rows, &ret);
  std::string why;
  const toml::node* location = read["location"];
  if (location != nullptr && !http::Template::parse(ret.location, http::TemplateText::uri, &why))
    r.error(*location, p + ".location", why);
  const bool redirect = ret.status >= 300 && ret.status < 400;
  if (const auto* status = read["status"]; status != nullptr && redirect && ret.location.empty())
    r.error(*status, p + ".status", "a " + std::to_string(ret.status) + " answer needs a location");
  const toml::node* body = read["body"];
  if (body != nullptr && !http::Template::parse(ret.body, http::TemplateText::body, &why))
    r.error(*body, p + ".body", why);
  if (body != nullptr && !ret.body.empty() && (ret.status == 204 || ret.status == 304))
    r.error(*body, p + ".body", "a " + std::to_string(ret.status) + " answer has no body (RFC 9110 §15.3.5, §15.4.5)");
  if (const auto* type = read["content_type"];
      type != nullptr && (ret.content_type.empty() ||
                          !http::Template::parse(ret.content_type, http::TemplateText::field_value, &why) ||
                          ret.content_type.find('$') != std::string::npos))
    r.error(*type, p + ".content_type", "must be a media type like \"text/html; charset=utf-8\" (no variables)");
  route.answer = std::move(ret);
}

// A route that answers itself forwards nothing, so the keys about forwarding are refused there
// rather than silently ignored.
void check_forwarding(Reader& r, const toml::table& table, const std::string& path, const RouteConfig& route) {
  if (!route.answer) return;
  const std::string_view forwarding_keys[] = {"upstream", "strip_prefix", "rewrite_prefix", "request_headers",
                                              compress_key};
  for (const std::string_view key : forwarding_keys) {
    if (const toml::node* node = table.get(key))
      r.error(*node, path + "." + std::string(key),
              "a route with return answers itself and forwards nothing; remove " + std::string(key));
  }
}

RouteConfig read_route(Reader& r, const toml::table& table, const std::string& path) {
  RouteConfig route;
  route.where = location_of(table);
  const Read read = r.walk(table, path, route_rows, &route);
  if (const auto* node = read["host"]) {
    std::string host;
    if (r.take_string(table, "host", path + ".host", host)) {
      if (auto pattern = normalize_host_pattern(host)) route.host = std::move(*pattern);
      else
        r.error(*node, path + ".host",
                "invalid host pattern '" + host + "'; expected a name like \"api.example.com\" or \"*.example.com\"");
    }
  }
  r.read_header_rules(table, "request_headers", path + ".request_headers", route.request_headers);
  r.read_header_rules(table, "response_headers", path + ".response_headers", route.response_headers);
  if (const auto* node = read["return"]) read_return(r, *node, path + ".return", route);
  check_forwarding(r, table, path, route);
  if (table.contains("return")) r.route_upstreams.push_back(nullptr);  // answers itself: no upstream
  else if (r.require(table, "upstream", path, "the upstream this route sends to")) r.route_upstreams.push_back(read["upstream"]);
  else r.route_upstreams.push_back(nullptr);
  r.read_cidrs(table, "allow", path + ".allow", route.allow);
  r.read_cidrs(table, "deny", path + ".deny", route.deny);
  if (const auto* node = read["rate_limit"]) read_rate_limit(r, *node, path + ".rate_limit", route);
  r.read_error_pages(table, path + ".error_pages", route.error_pages);
  route.compress = read_compress(r, table, path);
  r.record(table, path, route_rows, &route);
  return route;
}

}  // namespace route_section

const KeyTable route_table = route_section::route_rows;

void read_routes(Reader& r, const toml::table& root, std::vector<RouteConfig>& out) {
  const toml::node* node = root.get("route");
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    r.type_error(*node, "route", "an array of tables ([[route]])");
    return;
  }
  // (host, path_prefix) -> the route that claimed it first.
  std::unordered_map<std::string, std::string> seen;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string path = index_path("route", i);
    const toml::table* table = array->get(i)->as_table();
    if (table == nullptr) {
      r.type_error(*array->get(i), path, "a table");
      continue;
    }
    RouteConfig route = route_section::read_route(r, *table, path);
    r.answers_only = (i == 0 || r.answers_only) && table->contains("return");
    const auto [it, inserted] = seen.try_emplace(route.host + '\n' + route.path_prefix, path);
    if (!inserted) r.error(*table, path, "duplicate route: same host and path_prefix as " + it->second);
    out.push_back(std::move(route));
  }
}

}  // namespace sluice::config
