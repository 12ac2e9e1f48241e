#include "sluice/tls/ticket_keys.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "sluice/core/file.hpp"

namespace sluice::tls {

namespace {

// Where a context keeps its TicketKeys (OpenSSL's per-context extra data).
int keys_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

bool use_hmac_key(EVP_MAC_CTX* hmac, const TicketKey& key) {
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(key.hmac.data()),
                                        key.hmac.size()),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  return EVP_MAC_CTX_set_params(hmac, params) == 1;
}

// OpenSSL's ticket key callback. enc = 1: a new ticket, sealed with the first key under a fresh
// IV. enc = 0: the ticket's key by its name; 0 (unknown: a full handshake), 1 (the current key),
// 2 (an older key: resumed, and a new ticket sealed with the current key is sent), -1 on error.
int ticket_key_callback(SSL* ssl, unsigned char name[16], unsigned char* iv, EVP_CIPHER_CTX* cipher,
                        EVP_MAC_CTX* hmac, int enc) {
  const auto* self = static_cast<const TicketKeys*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), keys_index()));
  if (self == nullptr) return -1;
  const auto list = self->current();  // kept alive until the cipher and HMAC have their keys
  if (list == nullptr || list->keys.empty()) return -1;
  const auto& keys = list->keys;
  if (enc == 1) {
    const TicketKey& key = keys.front();
    if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1) return -1;
    std::memcpy(name, key.name.data(), key.name.size());
    if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes.data(), iv) != 1) return -1;
    return use_hmac_key(hmac, key) ? 1 : -1;
  }
  const auto found = std::find_if(keys.begin(), keys.end(), [&](const TicketKey& k) {
    return std::memcmp(k.name.data(), name, k.name.size()) == 0;
  });
  if (found == keys.end()) return 0;
  if (!use_hmac_key(hmac, *found)) return -1;
  if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, found->aes.data(), iv) != 1) return -1;
  return found == keys.begin() ? 1 : 2;
}

}  // namespace

TicketKey TicketKey::random() {
  TicketKey key;
  if (RAND_bytes(key.name.data(), key.name.size()) != 1 || RAND_bytes(key.hmac.data(), key.hmac.size()) != 1 ||
      RAND_bytes(key.aes.data(), key.aes.size()) != 1)
    throw std::runtime_error("cannot make a session ticket key: no randomness from OpenSSL");
  return key;
}

void TicketKey::append_to(std::string& out) const {
  out.append(reinterpret_cast<const char*>(name.data()), name.size());
  out.append(reinterpret_cast<const char*>(hmac.data()), hmac.size());
  out.append(reinterpret_cast<const char*>(aes.data()), aes.size());
}

TicketKey TicketKey::from_bytes(const char* at) {
  TicketKey key;
  std::memcpy(key.name.data(), at, 16);
  std::memcpy(key.hmac.data(), at + 16, 32);
  std::memcpy(key.aes.data(), at + 48, 32);
  return key;
}

TicketKeyList::~TicketKeyList() {
  if (!keys.empty()) OPENSSL_cleanse(keys.data(), keys.size() * sizeof(TicketKey));
}

void TicketKeys::set(std::vector<TicketKey> keys) {
  keys_.store(std::make_shared<const TicketKeyList>(std::move(keys)));
}

bool TicketKeys::empty() const {
  const auto list = current();
  return list == nullptr || list->keys.empty();
}

std::optional<std::string> TicketKeys::read(const std::string& path) {
  std::string bytes;
  if (const int error = read_whole_file(path, bytes); error != 0)
    return "cannot read '" + path + "': " + std::system_category().message(error);
  if (bytes.empty() || bytes.size() % ticket_key_bytes != 0) {
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return "'" + path + "': must hold one or more 80-byte keys (openssl rand 80), got " +
           std::to_string(bytes.size()) + " bytes";
  }
  std::vector<TicketKey> keys;
  for (std::size_t at = 0; at < bytes.size(); at += ticket_key_bytes)
    keys.push_back(TicketKey::from_bytes(bytes.data() + at));
  OPENSSL_cleanse(bytes.data(), bytes.size());
  set(std::move(keys));
  return std::nullopt;
}

void TicketKeys::install(SSL_CTX* ctx) const {
  SSL_CTX_set_ex_data(ctx, keys_index(), const_cast<TicketKeys*>(this));
  SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_callback);
}

std::optional<std::string> check_ticket_key_file(const std::string& path) {
  TicketKeys keys;
  return keys.read(path);
}

}  // namespace sluice::tls
