#include "sluice/tls/acme_slot.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "sluice/core/file.hpp"
#include "sluice/tls/acme_challenge.hpp"
#include "sluice/tls/acme_crypto.hpp"

namespace sluice::tls::acme {

namespace {

char lower(char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); }

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = lower(c);
  return out;
}

SystemTime to_time(const ASN1_TIME* t) {
  std::tm tm{};
  ASN1_TIME_to_tm(t, &tm);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Slot>> slots;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::optional<std::pair<SystemTime, SystemTime>> certificate_window(const std::string& cert_file) {
  std::string text;
  if (read_whole_file(cert_file, text) != 0) return std::nullopt;
  return pem_certificate_window(text);
}

std::optional<std::pair<SystemTime, SystemTime>> pem_certificate_window(const std::string& text) {
  BIO* bio = BIO_new_mem_buf(text.data(), static_cast<int>(text.size()));
  X509* leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (leaf == nullptr) return std::nullopt;
  std::pair window{to_time(X509_get0_notBefore(leaf)), to_time(X509_get0_notAfter(leaf))};
  X509_free(leaf);
  return window;
}

Slot::Slot(std::vector<std::string> domains, std::string storage)
    : domains_(std::move(domains)), storage_(std::move(storage)) {
  // A certificate kept from an earlier run is served again while it is valid; the client renews
  // it when its time comes, as it would have without the restart.
  const auto window = certificate_window(cert_file());
  std::string key;
  if (window && window->second > std::chrono::system_clock::now() && read_whole_file(key_file(), key) == 0)
    status_.not_after = window->second;
}

bool Slot::serves(std::string_view server_name) const noexcept {
  return std::any_of(domains_.begin(), domains_.end(), [&](const std::string& d) {
    return d.size() == server_name.size() &&
           std::equal(d.begin(), d.end(), server_name.begin(),
                      [](char a, char b) { return lower(a) == lower(b); });
  });
}

std::string Slot::directory() const { return storage_ + "/" + lower(domains_.front()); }

void Slot::subscribe(const void* owner, Listener on_install) {
  std::lock_guard lock(mutex_);
  if (status_.not_after) on_install();
  listeners_.emplace_back(owner, std::move(on_install));
}

void Slot::unsubscribe(const void* owner) {
  std::lock_guard lock(mutex_);
  std::erase_if(listeners_, [&](const auto& l) { return l.first == owner; });
}

bool Slot::issued() const {
  std::lock_guard lock(mutex_);
  return status_.not_after.has_value();
}

// The listeners rebuild their contexts under the lock: one that is being destroyed waits in
// unsubscribe() until this is done with it.
std::string Slot::install(SystemTime not_after) {
  std::lock_guard lock(mutex_);
  status_.not_after = not_after;
  std::string refused;
  for (const auto& l : listeners_)
    if (auto why = l.second(); refused.empty()) refused = std::move(why);
  return refused;
}

void Slot::set_challenge(const std::string& domain, std::shared_ptr<boost::asio::ssl::context> context) {
  std::lock_guard lock(mutex_);
  challenges_[lower(domain)] = std::move(context);
}

void Slot::set_http_answer(const std::string& token, std::string key_authorization) {
  std::lock_guard lock(mutex_);
  http_answers_[token] = std::move(key_authorization);
}

std::optional<std::string> Slot::http_answer(std::string_view token) const {
  std::lock_guard lock(mutex_);
  const auto it = http_answers_.find(token);
  if (it == http_answers_.end()) return std::nullopt;
  return it->second;
}

void Slot::clear_challenges() {
  std::lock_guard lock(mutex_);
  challenges_.clear();
  http_answers_.clear();
  pending_.clear();
}

void Slot::answer(const PendingChallenge& c) {
  if (c.alpn) {
    const PrivateKey key = new_p256_key();
    const Certificate cert = challenge_certificate(key.get(), c.name, c.key_authorization);
    set_challenge(c.name, challenge_context(key.get(), cert.get()));
  } else {
    set_http_answer(c.name, c.key_authorization);
  }
  std::lock_guard lock(mutex_);
  pending_.push_back(c);
}

std::vector<PendingChallenge> Slot::pending_challenges() const {
  std::lock_guard lock(mutex_);
  return pending_;
}

std::shared_ptr<boost::asio::ssl::context> Slot::challenge(std::string_view domain) const {
  std::lock_guard lock(mutex_);
  const auto it = challenges_.find(lower(domain));
  return it == challenges_.end() ? nullptr : it->second;
}

SlotStatus Slot::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void Slot::set_status(SlotStatus status) {
  std::lock_guard lock(mutex_);
  status_ = std::move(status);
}

std::shared_ptr<Slot> slot_for(const std::vector<std::string>& domains, const std::string& storage) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& s : r.slots)
    if (s->domains() == domains) return s;
  r.slots.push_back(std::make_shared<Slot>(domains, storage));
  return r.slots.back();
}

std::vector<std::shared_ptr<Slot>> all_slots() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.slots;
}

std::optional<std::string> http_challenge_answer(std::string_view target) {
  constexpr std::string_view prefix = "/.well-known/acme-challenge/";
  if (!target.starts_with(prefix)) return std::nullopt;
  for (const auto& slot : all_slots())
    if (auto answer = slot->http_answer(target.substr(prefix.size()))) return answer;
  return std::nullopt;
}

SystemTime renewal_time(SystemTime not_before, SystemTime not_after) {
  return not_after - (not_after - not_before) / 3;
}

std::chrono::seconds retry_delay(unsigned failures) {
  constexpr std::chrono::seconds first{60};
  constexpr std::chrono::seconds most{86400};
  if (failures == 0) return std::chrono::seconds(0);
  const unsigned shift = std::min(failures - 1, 20u);
  return std::min(most, std::chrono::seconds(first.count() << shift));
}

}  // namespace sluice::tls::acme
