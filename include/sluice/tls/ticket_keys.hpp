#pragma once
// Session ticket keys shared beyond one context, so that a ticket issued before a reload, or by
// another sluice process, still resumes: read from a file ([[server.tls]] session_ticket_key_file)
// or, in a fleet, loaded from Redis and replaced at each rotation (runtime/fleet_tickets.hpp).
//
// A file holds one or more 80-byte keys back to back, each laid out as nginx's
// ssl_session_ticket_key: 16 bytes of key name, 32 of HMAC-SHA256 secret, 32 of AES-256-CBC key
// (`openssl rand 80 > ticket.key` makes one). The first key encrypts new tickets; every key
// decrypts, and a ticket made with a later one is renewed with the first. Rotating is prepending a
// new key and dropping the oldest, then a reload.
#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <openssl/ssl.h>

namespace sluice::tls {

inline constexpr std::size_t ticket_key_bytes = 80;

struct TicketKey {
  std::array<unsigned char, 16> name;
  std::array<unsigned char, 32> hmac;
  std::array<unsigned char, 32> aes;

  // A fresh key from OpenSSL's random generator (throws std::runtime_error when it fails).
  static TicketKey random();
  // The key as 80 bytes (name, HMAC secret, AES key), the file's layout; and back (`bytes` holds
  // at least 80).
  void append_to(std::string& out) const;
  static TicketKey from_bytes(const char* bytes);
  bool operator==(const TicketKey&) const = default;
};

// Keys in order, the first encrypting; wiped from memory when destroyed.
struct TicketKeyList {
  std::vector<TicketKey> keys;
  TicketKeyList() = default;
  explicit TicketKeyList(std::vector<TicketKey> k) : keys(std::move(k)) {}
  ~TicketKeyList();
  TicketKeyList(const TicketKeyList&) = delete;
  TicketKeyList& operator=(const TicketKeyList&) = delete;
};

// The keys one or more contexts use. `set` may replace them at any time from another thread: a
// handshake reads whichever list is current (an atomic shared pointer; no lock is held while
// OpenSSL uses it).
class TicketKeys {
public:
  TicketKeys() = default;
  TicketKeys(const TicketKeys&) = delete;
  TicketKeys& operator=(const TicketKeys&) = delete;

  // Reads `path`; nullopt = fine, else the message naming the file (unreadable, empty, or a
  // size that is not a multiple of 80 bytes).
  std::optional<std::string> read(const std::string& path);
  void set(std::vector<TicketKey> keys);
  std::shared_ptr<const TicketKeyList> current() const { return keys_.load(); }
  bool empty() const;

  // Makes `ctx` encrypt and decrypt its session tickets with these keys. The object must outlive
  // the context's use (the ServerContext holds both).
  void install(SSL_CTX* ctx) const;

private:
  std::atomic<std::shared_ptr<const TicketKeyList>> keys_;
};

// A key file as the config loader checks it. nullopt = fine, else the message.
std::optional<std::string> check_ticket_key_file(const std::string& path);

}  // namespace sluice::tls
