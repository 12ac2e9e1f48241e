#pragma once
// Session ticket keys read from a file ([[server.tls]] session_ticket_key_file), so that a ticket
// issued before a reload, or by another sluice process given the same file, still resumes.
//
// The file holds one or more 80-byte keys back to back, each laid out as nginx's
// ssl_session_ticket_key: 16 bytes of key name, 32 of HMAC-SHA256 secret, 32 of AES-256-CBC key
// (`openssl rand 80 > ticket.key` makes one). The first key encrypts new tickets; every key
// decrypts, and a ticket made with a later one is renewed with the first. Rotating is prepending a
// new key and dropping the oldest, then a reload.
#include <array>
#include <cstddef>
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
};

// The keys of a file, in the file's order. Wiped from memory when destroyed.
class TicketKeys {
public:
  TicketKeys() = default;
  ~TicketKeys();
  TicketKeys(const TicketKeys&) = delete;
  TicketKeys& operator=(const TicketKeys&) = delete;

  // Reads `path`; nullopt = fine, else the message naming the file (unreadable, empty, or a
  // size that is not a multiple of 80 bytes).
  std::optional<std::string> read(const std::string& path);
  const std::vector<TicketKey>& keys() const noexcept { return keys_; }

  // Makes `ctx` encrypt and decrypt its session tickets with these keys. The object must outlive
  // the context's use (the ServerContext owns both).
  void install(SSL_CTX* ctx) const;

private:
  std::vector<TicketKey> keys_;
};

// A key file as the config loader checks it. nullopt = fine, else the message.
std::optional<std::string> check_ticket_key_file(const std::string& path);

}  // namespace sluice::tls
