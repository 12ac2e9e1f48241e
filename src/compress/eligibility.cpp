// Whether a response is compressed (eligibility.hpp): the facts of its head, read in one pass,
// and the decision over them.
#include "sluice/compress/eligibility.hpp"

#include <algorithm>
#include <array>

#include "ascii.hpp"
#include "sluice/http/head_index.hpp"

namespace sluice::compress {
namespace {

std::string_view trim_ows_of(std::string_view s) noexcept {
  while (!s.empty() && ascii::is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && ascii::is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// Calls f(element) for each comma-separated element of a list value, trimmed; stops when f
// returns true, and says whether one did. (Vary and Cache-Control hold no quoted commas that
// matter here: a quoted directive argument can only make an element that matches nothing.)
template <class F>
bool any_element(std::string_view list, F&& f) {
  while (true) {
    const auto comma = list.find(',');
    if (f(trim_ows_of(list.substr(0, comma)))) return true;
    if (comma == std::string_view::npos) return false;
    list.remove_prefix(comma + 1);
  }
}

// The media type of a Content-Type value, without its parameters (RFC 9110 §8.3.1).
std::string_view media_type_of(std::string_view content_type) noexcept {
  return trim_ows_of(content_type.substr(0, content_type.find(';')));
}

bool type_listed(const std::vector<std::string>& types, std::string_view media_type) noexcept {
  if (media_type.empty()) return false;
  const auto slash = media_type.find('/');
  return std::any_of(types.begin(), types.end(), [&](const std::string& range) {
    // "text/*": the top-level type, slash included, must match.
    if (range.size() >= 2 && range.ends_with("/*"))
      return slash != std::string_view::npos &&
             ascii::iequals(media_type.substr(0, slash + 1),
                            std::string_view(range).substr(0, range.size() - 1));
    return ascii::iequals(media_type, range);
  });
}

constexpr std::array<std::string_view, 12> builtin_types = {
    "text/html",
    "text/plain",
    "text/css",
    "text/xml",
    "text/javascript",
    "application/javascript",
    "application/json",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "image/svg+xml",
};

// The response fields the decision reads, by name (none of them is a KnownField of the index).
void note_fact(ResponseFacts& facts, std::string_view name, std::string_view value) noexcept {
  if (ascii::iequals(name, "content-type")) {
    if (facts.content_type.empty()) facts.content_type = value;
  } else if (ascii::iequals(name, "content-encoding")) {
    facts.content_encoding = true;
  } else if (ascii::iequals(name, "content-range")) {
    facts.content_range = true;
  } else if (ascii::iequals(name, "cache-control")) {
    facts.no_transform = facts.no_transform || any_element(value, [](std::string_view d) {
                           return ascii::iequals(d, "no-transform");
                         });
  } else if (ascii::iequals(name, "vary")) {
    facts.vary_covers = facts.vary_covers || any_element(value, [](std::string_view v) {
                          return v == "*" || ascii::iequals(v, "accept-encoding");
                        });
  } else if (ascii::iequals(name, "etag")) {
    facts.strong_etag = !value.empty() && value.front() == '"';
  }
}

// The response's own reasons, in the order a reader checks them; none of them depends on the
// request, so Vary follows from them alone.
Skip response_skip(const Policy& policy, const ResponseFacts& res) noexcept {
  if (res.status < 200 || res.status == 204 || res.status == 304) return Skip::status;
  if (res.status == 206 || res.content_range) return Skip::partial;
  if (res.content_encoding) return Skip::encoded;
  if (res.no_transform) return Skip::no_transform;
  if (res.transfer_coding) return Skip::transfer_coding;
  if (res.content_length && *res.content_length < policy.min_bytes) return Skip::small;
  if (!type_listed(policy.types, media_type_of(res.content_type))) return Skip::type;
  return Skip::none;
}

}  // namespace

Policy::Policy() : types(builtin_types.begin(), builtin_types.end()) {}

std::span<const std::string_view> default_types() noexcept { return builtin_types; }

bool valid_media_range(std::string_view range) noexcept {
  const auto slash = range.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == range.size()) return false;
  const auto type = range.substr(0, slash);
  const auto subtype = range.substr(slash + 1);
  const auto token = [](std::string_view t) {
    return std::all_of(t.begin(), t.end(), ascii::is_tchar);
  };
  return token(type) && type != "*" && (subtype == "*" || token(subtype));
}

std::string_view describe(Skip s) noexcept {
  switch (s) {
    case Skip::none:
      return "compressed";
    case Skip::not_accepted:
      return "no accepted coding";
    case Skip::head_request:
      return "HEAD request";
    case Skip::http10_client:
      return "HTTP/1.0 client";
    case Skip::status:
      return "status without a body";
    case Skip::partial:
      return "partial content";
    case Skip::encoded:
      return "already encoded";
    case Skip::no_transform:
      return "no-transform";
    case Skip::transfer_coding:
      return "transfer coding";
    case Skip::small:
      return "below min_bytes";
    case Skip::type:
      return "content type not listed";
  }
  return "unknown";
}

ResponseFacts facts_of(const http::ResponseHead& res) noexcept {
  ResponseFacts facts;
  facts.status = res.status();
  facts.content_length = res.content_length();
  bool etag_seen = false;
  for (const auto& f : res.fields()) {
    if (f.known == http::KnownField::transfer_encoding) {
      // Anything but a lone "chunked" names a coding (the framing already refused the rest).
      facts.transfer_coding =
          facts.transfer_coding || !ascii::iequals(trim_ows_of(res.value(f)), "chunked");
      continue;
    }
    if (f.known != http::KnownField::unknown) continue;
    const auto name = res.name(f);
    if (ascii::iequals(name, "etag")) {
      if (etag_seen) continue;  // the first ETag is the validator
      etag_seen = true;
    }
    note_fact(facts, name, res.value(f));
  }
  return facts;
}

Plan plan(const Policy& policy, const ResponseFacts& res, const RequestSide& req) noexcept {
  Plan p;
  p.skip = response_skip(policy, res);
  if (p.skip != Skip::none) return p;
  p.vary = !res.vary_covers;
  if (req.head)
    p.skip = Skip::head_request;
  else if (req.client_version < 11)
    p.skip = Skip::http10_client;
  else if (req.accepted == Coding::identity)
    p.skip = Skip::not_accepted;
  if (p.skip != Skip::none) return p;
  p.coding = req.accepted;
  p.weaken_etag = res.strong_etag;
  return p;
}

void edit_head(const Plan& plan, http::ResponseSplice& edits) noexcept {
  if (plan.compress()) {
    edits.content_encoding = token(plan.coding);
    edits.drop_length = edits.drop_accept_ranges = true;
    edits.weaken_etag = plan.weaken_etag;
  }
  edits.add_vary = plan.vary;
}

}  // namespace sluice::compress
