#pragma once
// The ACME client (RFC 8555): orders the certificate of one [[server.tls]] acme table and keeps
// it renewed. It runs on its own thread (AcmeService), never on a worker: its HTTPS requests to
// the CA are blocking, and a listener only sees the result through its slot (acme_slot.hpp).
//
// Storage ([acme] storage, 0700): account.key (the account's P-256 key, 0600), and per
// certificate <first domain>/cert.pem (the chain) and key.pem (0600). A restart reuses both.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sluice/tls/acme_challenge_kind.hpp"
#include "sluice/tls/acme_slot.hpp"

namespace sluice::tls::acme {

// What one certificate is ordered with: a [[server.tls]] acme table.
struct OrderSettings {
  std::vector<std::string> domains;
  std::string directory;  // https URL of the CA's directory
  std::string email;      // "" = no contact
  std::string ca_file;    // CAs of the directory's HTTPS certificate; "" = the system's
  AcmeChallenge challenge = AcmeChallenge::tls_alpn_01;
  // How long a challenge is answerable before the CA is asked to validate it (a fleet's other
  // instances take it from Redis meanwhile); 0 = at once.
  std::chrono::milliseconds challenge_delay{0};
};

// Waits up to `d`; false when the client is asked to stop (then it gives up at once).
using Wait = std::function<bool(std::chrono::milliseconds d)>;
// One line for the log: what the client is doing or what failed.
using Log = std::function<void(const std::string& line)>;

// Orders a certificate for `order` from its CA through the whole RFC 8555 §7.1 flow and writes
// it to the slot's files, then installs it. Throws std::runtime_error with the reason (the CA's
// problem document's detail when there is one).
void obtain_certificate(const OrderSettings& order, const std::string& storage, Slot& slot, const Wait& wait,
                        const Log& log);

// Writes a certificate chain and its PEM private key to the slot's files and installs it (the
// end of an order, or a certificate another instance of a fleet ordered). Throws
// std::runtime_error with the reason.
void store_certificate(Slot& slot, const std::string& chain, const std::string& key);

// In a fleet: whether this instance may order the certificate of `name` (its first domain) now.
using MayOrder = std::function<bool(const std::string& name)>;

// The thread that keeps every ACME certificate of the config: orders what is missing, renews
// at renewal_time(), retries a failure after retry_delay(). The orders are those of the config
// the process started with ([acme] and acme tables are restart keys).
class AcmeService {
public:
  // `may_order`, when given, is asked before each order (runtime/fleet_acme.hpp).
  AcmeService(std::string storage, std::vector<OrderSettings> orders, Log log, MayOrder may_order = {});
  ~AcmeService();  // stops the thread (an order in progress is abandoned) and joins it
  AcmeService(const AcmeService&) = delete;
  AcmeService& operator=(const AcmeService&) = delete;

private:
  void run();
  // One certificate: obtained if it is missing or due; returns when to look at it again.
  SystemTime attend(const OrderSettings& order, Slot& slot);
  bool wait_for(std::chrono::milliseconds d);

  const std::string storage_;
  const std::vector<OrderSettings> orders_;
  const Log log_;
  const MayOrder may_order_;
  std::set<std::string> waiting_;  // for another instance's order (logged once each); this thread's
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::tls::acme
