#pragma once
// OCSP stapling, the running part: each listener certificate with a responder has an OcspStaple,
// the response currently stapled, which the control thread's OcspStapler fetches, verifies and
// replaces in the background, and which every worker reads in its handshakes without a lock.
// A handshake never waits for a fetch: without a usable response it goes on without a staple.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <openssl/types.h>

#include "sluice/tls/ocsp.hpp"

namespace sluice::tls {

// One certificate's staple. Written by the control thread (publish), read by any worker.
class OcspStaple {
public:
  explicit OcspStaple(std::string cert_file) : cert_file_(std::move(cert_file)) {}
  const std::string& cert_file() const noexcept { return cert_file_; }
  // The last verified good or revoked response, or null; may have expired since (check
  // ocsp::stapleable before use). Lock-free to callers: an atomic shared_ptr copy, no allocation.
  std::shared_ptr<const ocsp::Response> current() const noexcept {
    return current_.load(std::memory_order_acquire);
  }
  void publish(std::shared_ptr<const ocsp::Response> response) noexcept {
    current_.store(std::move(response), std::memory_order_release);
  }
  // Fetches that failed (no answer, a bad answer, "unknown") since the start.
  std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_relaxed); }
  void count_failure() noexcept { failures_.fetch_add(1, std::memory_order_relaxed); }

private:
  std::string cert_file_;
  std::atomic<std::shared_ptr<const ocsp::Response>> current_;
  std::atomic<std::uint64_t> failures_{0};
};

// Makes `ctx` staple `staple`'s response to a client that asks (status_request, RFC 6066 §8),
// when it has one that has not expired. `staple` must outlive the context.
void staple_from(SSL_CTX* ctx, const OcspStaple* staple);

// Fetches every watched certificate's status over HTTP from its responder, on the control
// thread's io_context: at once, then again at half the time to the response's nextUpdate; a
// failure is retried with back-off and leaves the current staple in place until it expires.
// Control thread only.
class OcspStapler {
public:
  explicit OcspStapler(boost::asio::io_context& io) : io_(io) {}
  ~OcspStapler();
  OcspStapler(const OcspStapler&) = delete;
  OcspStapler& operator=(const OcspStapler&) = delete;

  // The staple of `cert_file`'s leaf, kept fresh for as long as the returned pointer (held by the
  // listener contexts) lives. The same certificate and responder get the same staple, so a reload
  // that keeps a certificate keeps its response. nullptr when the certificate cannot be stapled
  // (no responder, no issuer in the file: logged, not an error).
  std::shared_ptr<OcspStaple> watch(const std::string& cert_file, const std::string& responder_override);
  // Every staple watched now (for metrics and the status API).
  std::vector<std::shared_ptr<const OcspStaple>> staples() const;
  // Cancels every fetch and timer: run() of the io_context may return.
  void stop();

  struct Watched;  // ocsp_stapler.cpp: a subject, its staple, its fetch's sockets and timer

private:
  boost::asio::io_context& io_;
  std::map<std::string, std::shared_ptr<Watched>> watched_;  // by Subject::identity()
  bool stopped_ = false;
};

}  // namespace sluice::tls
