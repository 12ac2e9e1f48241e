#pragma once
// The edge rules of a route and an upstream (docs/edge.md), in the flat form the data path applies:
// header rules (request_headers / response_headers), path rewrites (strip_prefix /
// rewrite_prefix) and fixed answers (return). Compiled once per config snapshot on the control
// thread (runtime/snapshot), then only read, by every worker, without locks. Applying them writes
// straight into the head being serialised: nothing is allocated per request (a literal is copied,
// a variable is a view of the request's own bytes or of its connection's state).
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::http {

// What `$name` (or `${name}`) in a rule's value stands for; `$$` is a literal '$'.
enum class Variable : std::uint8_t {
  request_id,      // the X-Request-Id sent to the origin and echoed to the client
  host,            // the request's Host without its port
  client_ip,       // the client's address
  upstream,        // the upstream's name ("" on a route with `return`)
  server,          // identity of the server that took the request ("" before one was picked)
  config_version,  // the snapshot's version (1 at start, +1 per reload)
  request_uri,     // the request-target as the client sent it, in origin-form (path and query)
  // The TLS client certificate (listeners with verify_client on; "" elsewhere): its subject
  // (RFC 2253), first DNS/URI/email subjectAltName, SHA-256 fingerprint (hex) and the
  // verification's result (SUCCESS, NONE, FAILED:reason).
  client_cert_subject,
  client_cert_san,
  client_cert_fingerprint,
  client_cert_verify,
};
inline constexpr std::size_t variable_count = 11;

// One request's values, as views into its own bytes; a value missing is empty.
struct Variables {
  std::array<std::string_view, variable_count> values{};
  std::string_view& operator[](Variable v) noexcept { return values[static_cast<std::size_t>(v)]; }
  std::string_view operator[](Variable v) const noexcept {
    return values[static_cast<std::size_t>(v)];
  }
};

// Which bytes a template's literal text may hold.
enum class TemplateText {
  field_value,  // a header value (RFC 9110 §5.5): VCHAR, obs-text, SP, HTAB; no SP/HTAB at the ends
  uri,          // a Location: visible ASCII only (RFC 3986 has no spaces or controls)
  body,         // a response body: anything
};

// A value with variables, compiled: literal pieces and variable references.
class Template {
public:
  Template() = default;
  // nullopt with `why` set when `text` names an unknown variable or holds bytes `kind` forbids.
  static std::optional<Template> parse(std::string_view text, TemplateText kind, std::string* why);
  // The expanded size, and the expansion appended to `out`.
  std::size_t size(const Variables& vars) const noexcept;
  void append(std::string& out, const Variables& vars) const;
  bool empty() const noexcept { return pieces_.empty(); }

private:
  struct Piece {
    std::uint32_t offset = 0;  // into literal_, for a literal piece
    std::uint32_t length = 0;
    std::int8_t variable = -1;  // a Variable, or -1 for a literal piece
  };
  std::string literal_;
  std::vector<Piece> pieces_;
};

// A header name a rule may not touch, and why; nullopt when it may. Hop-by-hop and framing fields
// (RFC 9110 §7.6.1, RFC 9112 §6) would desynchronise the two connections or lie about the
// message's length; Host routes the request; Sluice-* is sluice's own voice. Underscore variants
// (Content_Length) are refused alike (an origin folding '_' into '-' would frame by them).
std::optional<std::string_view> reserved_header(std::string_view name) noexcept;
// RFC 9110 §5.6.2: a field name is a token.
bool is_token(std::string_view text) noexcept;

// The header rules of one direction, flattened: the fields to drop from the message, and the
// lines to append after the ones kept. Blocks are applied in order (the upstream's, then the
// route's), each as remove, then set, then add, so that the flat form gives exactly what applying
// them one by one to the message would.
class HeaderRules {
public:
  using Pairs = std::span<const std::pair<std::string, std::string>>;
  // Templates were validated by the loader; one that does not parse any more throws (a bug).
  void apply(std::span<const std::string> remove, Pairs set, Pairs add);
  bool empty() const noexcept { return drop_.empty() && lines_.empty(); }
  // True when a field of this name is not forwarded (case-insensitive).
  bool drops(std::string_view name) const noexcept;
  // "Name: value\r\n" for each line, variables expanded; a line whose value expands to nothing is
  // left out (as nginx's add_header does).
  void append(std::string& out, const Variables& vars) const;

private:
  struct Line {
    std::string name;
    Template value;
  };
  void forget(std::string_view name);
  std::vector<std::string> drop_;  // lowercase
  std::vector<Line> lines_;
};

// strip_prefix / rewrite_prefix: the route's path_prefix is replaced by `replacement` ("/" for
// strip_prefix), with exactly one '/' where the two meet; the query string is kept as it is.
struct PathRewrite {
  std::size_t prefix_length = 0;
  std::string replacement;
};

// The target towards the origin: `target`'s path (origin-form, see path_of) with `rewrite`.
void append_rewritten_target(std::string& out, std::string_view target, const PathRewrite& rewrite);

// `return = { status, location, body, content_type }`: an answer sluice gives itself.
struct FixedAnswer {
  unsigned status = 200;
  Template location;  // empty: no Location
  Template body;
  std::string content_type;
};

// The whole answer (head and, unless `head_only`, body) appended to `out`: status line,
// Content-Type when there is a body, Content-Length, Location, X-Request-Id, `rules` (the
// response rules of the route), Connection: close unless `keep_alive` (keep-alive for an HTTP/1.0
// client that asked for it), and Date (`date`, an IMF-fixdate; empty: none) unless the rules set
// or remove it. Returns the body's size.
std::size_t append_fixed_answer(std::string& out, const FixedAnswer& answer, const Variables& vars,
                                const HeaderRules* rules, bool keep_alive, bool head_only,
                                unsigned client_version = 11, std::string_view date = {});

// "example.com:8080" -> "example.com", "[::1]:80" -> "[::1]".
std::string_view host_without_port(std::string_view host) noexcept;

}  // namespace sluice::http
