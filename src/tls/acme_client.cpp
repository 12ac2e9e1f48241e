#include "sluice/tls/acme_client.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <boost/json.hpp>

#include "acme_https.hpp"
#include "sluice/core/file.hpp"
#include "sluice/tls/acme_challenge.hpp"
#include "sluice/tls/acme_crypto.hpp"

namespace sluice::tls::acme {

namespace json = boost::json;

namespace {

// How long an order may take from the first request to the certificate: a CA that validates
// slower than this is retried later (retry_delay) rather than polled forever.
constexpr int max_polls = 60;
constexpr std::chrono::seconds max_poll_interval{10};
// Pebble rejects a share of nonces on purpose; a real CA may too (RFC 8555 §6.5).
constexpr int bad_nonce_retries = 5;

void make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create '" + path + "': " + std::strerror(errno));
}

// Written whole or not at all (a new file renamed over the old), `mode` from the start.
void write_file(const std::string& path, const std::string& text, mode_t mode) {
  const std::string temporary = path + ".new";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error("cannot write '" + temporary + "': " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced || ::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
}

// The account key kept in storage; a new one made (and kept) on first use.
PrivateKey account_key(const std::string& storage) {
  make_directory(storage);
  const std::string path = storage + "/account.key";
  std::string pem;
  if (read_whole_file(path, pem) == 0) {
    if (auto key = key_from_pem(pem)) return key;
    throw std::runtime_error("'" + path + "' holds no PEM private key");
  }
  PrivateKey key = new_p256_key();
  write_file(path, key_pem(key.get()), 0600);
  return key;
}

std::string text_of(const json::value& v, std::string_view key) {
  if (const auto* o = v.if_object())
    if (const auto* s = o->if_contains(key); s != nullptr && s->is_string()) return std::string(s->as_string());
  return {};
}

json::value parse_json(const Reply& reply, const std::string& url) {
  boost::system::error_code ec;
  json::value v = json::parse(reply.body, ec);
  if (ec) throw std::runtime_error(url + ": the CA's answer is not JSON (HTTP " + std::to_string(reply.status) + ")");
  return v;
}

// RFC 8555 §8.2: Retry-After in seconds when the CA sends one, else `fallback`; bounded.
std::chrono::milliseconds poll_interval(const Reply& reply, std::chrono::milliseconds fallback) {
  char* end = nullptr;
  const long seconds = std::strtol(reply.retry_after.c_str(), &end, 10);
  if (reply.retry_after.empty() || *end != '\0' || seconds < 0) return fallback;
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(seconds), max_poll_interval);
}

// One RFC 8555 exchange with a CA: the account, the nonce, and every request signed.
class Session {
public:
  Session(const OrderSettings& order, const std::string& storage, const Wait& wait)
      : order_(order),
        https_(order.ca_file, [&wait] { return wait(std::chrono::milliseconds(0)); }),
        key_(account_key(storage)),
        wait_(wait) {}

  void open_account();
  std::pair<std::string, json::value> new_order();
  void authorize(const std::string& authorization_url, Slot& slot);
  json::value poll(const std::string& url);
  std::string finalize(const std::string& order_url, EVP_PKEY* certificate_key);

private:
  Reply signed_post(const std::string& url, const std::string& payload);
  std::string url_of(std::string_view resource) const;
  std::string protected_header(const std::string& url) const;

  const OrderSettings& order_;
  Https https_;
  PrivateKey key_;
  const Wait& wait_;
  json::value directory_;
  std::string nonce_;
  std::string kid_;  // the account's URL, once known
};

std::string Session::url_of(std::string_view resource) const {
  const std::string url = text_of(directory_, resource);
  if (url.empty()) throw std::runtime_error(order_.directory + ": the directory has no " + std::string(resource));
  return url;
}

// RFC 8555 §6.2: the account's URL once it has one, its public key before.
std::string Session::protected_header(const std::string& url) const {
  json::object header{{"alg", "ES256"}, {"nonce", nonce_}, {"url", url}};
  if (kid_.empty()) header["jwk"] = json::parse(jwk(key_.get()));
  else header["kid"] = kid_;
  return json::serialize(header);
}

Reply Session::signed_post(const std::string& url, const std::string& payload) {
  for (int attempt = 0;; ++attempt) {
    if (nonce_.empty()) nonce_ = https_.get(url_of("newNonce"), true).nonce;
    const std::string body = sign_jws(key_.get(), protected_header(url), payload);
    nonce_.clear();
    Reply reply = https_.post(url, body, "application/jose+json");
    nonce_ = reply.nonce;
    if (reply.status < 400) return reply;
    const json::value problem = parse_json(reply, url);
    if (text_of(problem, "type") == "urn:ietf:params:acme:error:badNonce" && attempt < bad_nonce_retries) continue;
    throw std::runtime_error(url + ": HTTP " + std::to_string(reply.status) + ": " + text_of(problem, "detail"));
  }
}

void Session::open_account() {
  const Reply reply = https_.get(order_.directory);
  if (reply.status != 200) throw std::runtime_error(order_.directory + ": HTTP " + std::to_string(reply.status));
  directory_ = parse_json(reply, order_.directory);
  json::object account{{"termsOfServiceAgreed", true}};
  if (!order_.email.empty()) account["contact"] = json::array{json::string("mailto:" + order_.email)};
  // RFC 8555 §7.3: the same key finds the existing account (200) or makes one (201).
  kid_ = signed_post(url_of("newAccount"), json::serialize(account)).location;
  if (kid_.empty()) throw std::runtime_error("the CA answered newAccount without the account's URL");
}

std::pair<std::string, json::value> Session::new_order() {
  json::array identifiers;
  for (const auto& d : order_.domains) identifiers.push_back(json::object{{"type", "dns"}, {"value", d}});
  const Reply reply = signed_post(url_of("newOrder"), json::serialize(json::object{{"identifiers", identifiers}}));
  return {reply.location, parse_json(reply, url_of("newOrder"))};
}

// Until the resource is no longer pending or processing (RFC 8555 §7.1.6).
json::value Session::poll(const std::string& url) {
  std::chrono::milliseconds interval{250};
  for (int i = 0; i < max_polls; ++i) {
    const Reply reply = signed_post(url, "");  // POST-as-GET (RFC 8555 §6.3)
    json::value resource = parse_json(reply, url);
    const std::string status = text_of(resource, "status");
    if (status != "pending" && status != "processing") return resource;
    if (!wait_(poll_interval(reply, interval))) throw std::runtime_error("stopped");
    interval = std::min<std::chrono::milliseconds>(interval * 2, max_poll_interval);
  }
  throw std::runtime_error(url + ": still not done after " + std::to_string(max_polls) + " polls");
}

std::string utc_text(SystemTime t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

const json::object* challenge_of(const json::value& authorization, std::string_view type) {
  const auto* challenges = authorization.as_object().if_contains("challenges");
  if (challenges == nullptr || !challenges->is_array()) return nullptr;
  for (const auto& c : challenges->as_array())
    if (text_of(c, "type") == type) return c.if_object();
  return nullptr;
}

// One domain proven (RFC 8555 §7.5.1): the challenge made answerable, the CA told, the
// authorization polled until it is decided.
void Session::authorize(const std::string& authorization_url, Slot& slot) {
  const json::value authorization = parse_json(signed_post(authorization_url, ""), authorization_url);
  if (text_of(authorization, "status") == "valid") return;  // proven recently, reused by the CA
  const std::string domain = text_of(authorization.as_object().at("identifier"), "value");
  const bool alpn = order_.challenge == AcmeChallenge::tls_alpn_01;
  const json::object* challenge = challenge_of(authorization, alpn ? "tls-alpn-01" : "http-01");
  if (challenge == nullptr)
    throw std::runtime_error(domain + ": the CA offers no " + std::string(alpn ? "tls-alpn-01" : "http-01") + " challenge");
  const std::string authorization_key = key_authorization(text_of(*challenge, "token"), key_.get());
  slot.answer({alpn, alpn ? domain : text_of(*challenge, "token"), authorization_key});
  // In a fleet the CA's validation may reach another instance: it gets the answer through Redis
  // first (runtime/fleet_acme.hpp).
  if (order_.challenge_delay.count() > 0 && !wait_(order_.challenge_delay)) throw std::runtime_error("stopped");
  signed_post(text_of(*challenge, "url"), "{}");
  const json::value decided = poll(authorization_url);
  if (text_of(decided, "status") != "valid") {
    const json::object* failed = challenge_of(decided, alpn ? "tls-alpn-01" : "http-01");
    const json::value* error = failed != nullptr ? failed->if_contains("error") : nullptr;
    throw std::runtime_error(domain + ": authorization " + text_of(decided, "status") +
                             (error != nullptr ? ": " + text_of(*error, "detail") : ""));
  }
}

// RFC 8555 §7.4: the CSR sent once the order is ready, the certificate chain fetched once valid.
std::string Session::finalize(const std::string& order_url, EVP_PKEY* certificate_key) {
  json::value order = poll(order_url);
  if (text_of(order, "status") != "ready")
    throw std::runtime_error(order_url + ": order " + text_of(order, "status") + " before finalization");
  const std::string csr = base64url(csr_der(certificate_key, order_.domains));
  signed_post(text_of(order, "finalize"), json::serialize(json::object{{"csr", csr}}));
  order = poll(order_url);
  if (text_of(order, "status") != "valid")
    throw std::runtime_error(order_url + ": order " + text_of(order, "status") + " after finalization");
  const std::string chain = signed_post(text_of(order, "certificate"), "").body;
  if (chain.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
    throw std::runtime_error(order_url + ": the certificate is not a PEM chain");
  return chain;
}

}  // namespace

void obtain_certificate(const OrderSettings& order, const std::string& storage, Slot& slot, const Wait& wait,
                        const Log& log) {
  Session session(order, storage, wait);
  session.open_account();
  auto [order_url, created] = session.new_order();
  log("ordered a certificate for " + order.domains.front() + ": " + order_url);
  const auto* authorizations = created.as_object().if_contains("authorizations");
  if (authorizations == nullptr || !authorizations->is_array())
    throw std::runtime_error(order_url + ": the order lists no authorizations");
  for (const auto& a : authorizations->as_array()) session.authorize(std::string(a.as_string()), slot);
  slot.clear_challenges();
  const PrivateKey key = new_p256_key();
  const std::string chain = session.finalize(order_url, key.get());
  store_certificate(slot, chain, key_pem(key.get()));
}

void store_certificate(Slot& slot, const std::string& chain, const std::string& key) {
  const std::string directory = slot.directory();
  make_directory(directory.substr(0, directory.rfind('/')));  // the storage, before any order made it
  make_directory(directory);
  write_file(slot.key_file(), key, 0600);
  write_file(slot.cert_file(), chain, 0644);
  const auto window = certificate_window(slot.cert_file());
  if (!window) throw std::runtime_error(slot.cert_file() + ": cannot read the issued certificate");
  if (auto refused = slot.install(window->second); !refused.empty())
    throw std::runtime_error("the issued certificate does not load: " + refused);
}

AcmeService::AcmeService(std::string storage, std::vector<OrderSettings> orders, Log log, MayOrder may_order)
    : storage_(std::move(storage)),
      orders_(std::move(orders)),
      log_(std::move(log)),
      may_order_(std::move(may_order)) {
  thread_ = std::thread([this] { run(); });
}

AcmeService::~AcmeService() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool AcmeService::wait_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  wake_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

void AcmeService::run() {
  for (;;) {
    SystemTime next = SystemTime::max();
    for (const auto& order : orders_) {
      const auto slot = slot_for(order.domains, storage_);
      next = std::min(next, attend(order, *slot));
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::system_clock::now());
    // Woken at least hourly: a clock stepped forward (or a certificate replaced by hand) is seen.
    if (!wait_for(std::clamp<std::chrono::milliseconds>(wait, std::chrono::milliseconds(0), std::chrono::hours(1))))
      return;
  }
}

SystemTime AcmeService::attend(const OrderSettings& order, Slot& slot) {
  const auto now = std::chrono::system_clock::now();
  SlotStatus status = slot.status();
  if (status.next_attempt && *status.next_attempt > now) return *status.next_attempt;
  if (const auto window = slot.issued() ? certificate_window(slot.cert_file()) : std::nullopt) {
    const SystemTime renew = renewal_time(window->first, window->second);
    if (renew > now) {
      waiting_.erase(order.domains.front());
      return renew;
    }
  }
  // In a fleet another instance may be ordering it: asked again shortly, until its certificate
  // arrives through the fleet or the order falls to this instance.
  if (may_order_ && !may_order_(order.domains.front())) {
    if (waiting_.insert(order.domains.front()).second)
      log_("certificate for " + order.domains.front() + ": another instance of the fleet orders it");
    return now + std::chrono::seconds(1);
  }
  waiting_.erase(order.domains.front());
  std::string outcome;
  try {
    obtain_certificate(order, storage_, slot, [this](auto d) { return wait_for(d); }, log_);
    status = slot.status();
    status.failures = 0;
    status.last_error.clear();
    status.next_attempt.reset();
    outcome = "certificate for " + order.domains.front() + " issued, valid until " + utc_text(*status.not_after);
  } catch (const std::exception& e) {
    slot.clear_challenges();
    status = slot.status();
    status.failures += 1;
    status.last_error = e.what();
    status.next_attempt = now + retry_delay(status.failures);
    outcome = "certificate for " + order.domains.front() + " not obtained: " + status.last_error + "; retry in " +
              std::to_string(retry_delay(status.failures).count()) + "s";
  }
  // The status first: whoever reads the log line then finds it in /api/status.
  slot.set_status(status);
  log_(outcome);
  return status.next_attempt.value_or(now);
}

}  // namespace sluice::tls::acme
