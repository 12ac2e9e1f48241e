#include "sluice/proxy/admission.hpp"

#include "sluice/balancer/hash.hpp"
#include "sluice/http/head_index.hpp"

namespace sluice::proxy {

namespace ip = boost::asio::ip;

namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls `step(element)` for the elements of one X-Forwarded-For line from its last to its
// first, until it returns false (then false).
template <class Step>
bool walk_back(std::string_view list, Step& step) {
  while (!list.empty()) {
    const auto comma = list.rfind(',');
    const auto element = trim(comma == std::string_view::npos ? list : list.substr(comma + 1));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(0, comma);
    if (element.empty()) continue;  // RFC 9110 §5.6.1: empty list elements do not count
    if (!step(element)) return false;
  }
  return true;
}

// Walks the X-Forwarded-For elements from the last line's last element to the first line's
// first, calling `step(element)` until it returns false. (Several lines are one list, in
// order: RFC 9110 §5.3.)
template <class Step>
void for_each_from_last(const http::RequestHead& head, Step step) {
  if (head.count(http::KnownField::x_forwarded_for) == 0) return;
  const auto fields = head.fields();
  for (std::size_t n = fields.size(); n > 0; --n)
    if (fields[n - 1].known == http::KnownField::x_forwarded_for && !walk_back(head.value(fields[n - 1]), step))
      return;
}

}  // namespace

std::optional<ip::address> parse_forwarded_for(std::string_view element,
                                               std::string_view& text) noexcept {
  if (element.starts_with('[')) {  // "[v6]" or "[v6]:port"
    const auto close = element.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    element = element.substr(1, close - 1);
  } else if (element.find(':') == element.rfind(':') && element.find(':') != std::string_view::npos) {
    element = element.substr(0, element.find(':'));  // "v4:port": one colon only
  }
  auto a = parse_ip(element);
  if (a) text = element;
  return a;
}

ClientAddress resolve_client(const http::RequestHead& head, std::string_view peer_text,
                             const ip::address& peer, const CidrSet& trusted) noexcept {
  ClientAddress client{peer_text, peer};
  if (trusted.empty() || !contains(trusted, peer)) return client;
  for_each_from_last(head, [&](std::string_view element) {
    std::string_view text;
    const auto a = parse_forwarded_for(element, text);
    if (!a) return false;  // the trusted hop that passed this on is the client we know
    client = {text, *a};
    return contains(trusted, *a);
  });
  return client;
}

unsigned retry_after_seconds(Clock::duration d) noexcept {
  const auto s = std::chrono::ceil<std::chrono::seconds>(d).count();
  return s < 1 ? 1u : static_cast<unsigned>(s);
}

bool RouteAdmission::needed(const config::RouteConfig& route) noexcept {
  return !route.allow.empty() || !route.deny.empty() || route.rate_limit.has_value();
}

RouteAdmission::RouteAdmission(const config::RouteConfig& route, const RouteAdmission* previous)
    : allow_(route.allow), deny_(route.deny), rate_(route.rate_limit),
      label_(config::route_label(route.host, route.path_prefix)) {
  counters_ = previous != nullptr ? previous->counters_
                                  : std::make_shared<PerWorker<AdmissionCounters>>();
  if (!rate_) return;
  key_ = HashKey(rate_->key);
  if (previous != nullptr && previous->rate_ == rate_) {
    limiter_ = previous->limiter_;
    return;
  }
  RateLimiter::Settings s;
  s.interval = Clock::duration(rate_->period) / rate_->count;
  s.burst = rate_->burst;
  s.max_keys = rate_->max_keys;
  limiter_ = std::make_shared<RateLimiter>(s);
}

RouteAdmission::Result RouteAdmission::admit(const ClientAddress& client, const http::RequestHead& head,
                                             std::string_view target, Clock::time_point now,
                                             unsigned worker) const noexcept {
  // Deny first: an address in both lists is refused (the narrower intent wins).
  if (contains(deny_, client.address) || (!allow_.empty() && !contains(allow_, client.address))) {
    add_own<std::uint64_t>((*counters_)[worker].denied);
    return {Verdict::forbidden};
  }
  if (!limiter_) return {};
  // A request without the keyed header is keyed by its client address, so that leaving the
  // header out does not escape the limit. The first byte keeps the two kinds of key apart.
  const auto value = key_.extract(head, target, client.text);
  const bool by_header = key_.kind() == HashKey::Kind::header && value;
  const std::uint64_t key =
      hash_mix64(hash_key_bytes(by_header ? *value : client.text) ^ (by_header ? 1u : 0u));
  const auto d = limiter_->take(key, now);
  if (d.allowed) return {};
  add_own<std::uint64_t>((*counters_)[worker].limited);
  return {Verdict::limited, d.retry_after};
}

std::uint64_t RouteAdmission::total(std::atomic<std::uint64_t> AdmissionCounters::*field) const noexcept {
  std::uint64_t sum = 0;
  std::as_const(*counters_).for_each(
      [&](const AdmissionCounters& c) { sum += (c.*field).load(std::memory_order_relaxed); });
  return sum;
}

ProxyError admit_request(const RouteAdmission* admission, const ClientAddress& client,
                         const http::RequestHead& head, std::string_view target, Clock::time_point now,
                         unsigned worker) noexcept {
  if (admission == nullptr) return {};
  const auto result = admission->admit(client, head, target, now, worker);
  switch (result.verdict) {
    case RouteAdmission::Verdict::pass: return {};
    case RouteAdmission::Verdict::forbidden: return {403, "forbidden by route allow/deny"};
    case RouteAdmission::Verdict::limited:
      return {429, "rate limited", {}, {}, retry_after_seconds(result.retry_after)};
  }
  return {};
}

}  // namespace sluice::proxy
