#include "sluice/tls/ocsp_stapler.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include <ctime>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

namespace sluice::tls {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr auto nothrow = net::as_tuple(net::use_awaitable);
// A responder gets this long to answer a fetch, connection included.
constexpr std::chrono::seconds fetch_timeout{10};
// OCSP responses are a few KiB (a signature, perhaps the responder's certificate).
constexpr std::uint64_t max_response_bytes = 64 * 1024;

ocsp::UnixTime unix_now() { return static_cast<ocsp::UnixTime>(std::time(nullptr)); }

// The status callback, in a worker's handshake: a copy of the current response for OpenSSL to
// send and free, or no staple. Never waits.
int staple_status(SSL* ssl, void* arg) {
  const auto* staple = static_cast<const OcspStaple*>(arg);
  const auto response = staple->current();
  if (!response || !ocsp::stapleable(*response, unix_now())) return SSL_TLSEXT_ERR_NOACK;
  void* copy = OPENSSL_memdup(response->der.data(), response->der.size());
  if (copy == nullptr) return SSL_TLSEXT_ERR_NOACK;
  if (SSL_set_tlsext_status_ocsp_resp(ssl, static_cast<unsigned char*>(copy),
                                      static_cast<long>(response->der.size())) != 1) {
    OPENSSL_free(copy);
    return SSL_TLSEXT_ERR_NOACK;
  }
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

struct OcspStapler::Watched {
  Watched(net::io_context& io, ocsp::Subject s, ocsp::HttpUrl u)
      : subject(std::move(s)), url(std::move(u)), resolver(io), stream(io), timer(io) {}
  ocsp::Subject subject;
  ocsp::HttpUrl url;
  std::weak_ptr<OcspStaple> staple;  // the listener contexts own it; expired = stop fetching
  unsigned failures = 0;             // in a row
  bool stopped = false;
  tcp::resolver resolver;
  beast::tcp_stream stream;
  net::steady_timer timer;

  void cancel() {
    stopped = true;
    resolver.cancel();
    stream.cancel();
    timer.cancel();
  }
};

namespace {

using Fetched = std::variant<std::string, std::string>;  // index 0: the body; 1: why not

// One POST of the request to the responder (RFC 6960 §A.1), bounded by fetch_timeout.
net::awaitable<Fetched> post(OcspStapler::Watched& w) {
  const auto fail = [](std::string why) { return Fetched(std::in_place_index<1>, std::move(why)); };
  auto [rec, results] = co_await w.resolver.async_resolve(w.url.host, w.url.port, nothrow);
  if (rec) co_return fail("cannot resolve " + w.url.host + ": " + rec.message());
  w.stream.expires_after(fetch_timeout);
  auto [cec, peer] = co_await w.stream.async_connect(results, nothrow);
  if (cec) co_return fail("cannot connect: " + cec.message());
  http::request<http::string_body> req{http::verb::post, w.url.target, 11};
  const bool v6 = w.url.host.find(':') != std::string::npos;
  req.set(http::field::host, (v6 ? "[" + w.url.host + "]" : w.url.host) +
                                 (w.url.port == "80" ? "" : ":" + w.url.port));
  req.set(http::field::content_type, "application/ocsp-request");
  req.set(http::field::accept, "application/ocsp-response");
  req.set(http::field::connection, "close");
  req.body() = w.subject.request();
  req.prepare_payload();
  auto [wec, written] = co_await http::async_write(w.stream, req, nothrow);
  if (wec) co_return fail("cannot send the request: " + wec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_response_bytes);
  auto [ec, read] = co_await http::async_read(w.stream, buffer, parser, nothrow);
  boost::system::error_code ignored;
  w.stream.socket().close(ignored);
  if (ec) co_return fail("no answer: " + ec.message());
  if (parser.get().result() != http::status::ok)
    co_return fail("responder answered HTTP " + std::to_string(parser.get().result_int()));
  co_return Fetched(std::in_place_index<0>, std::move(parser.get().body()));
}

// One fetch and its verdict: the new response published, or the failure counted; the delay to
// the next fetch, in seconds.
net::awaitable<ocsp::UnixTime> refresh(OcspStapler::Watched& w, OcspStaple& staple) {
  const auto fetched = co_await post(w);
  const auto now = unix_now();
  const auto current = staple.current();
  std::string why;
  if (fetched.index() == 1) {
    why = std::get<1>(fetched);
  } else {
    auto verdict = w.subject.verify(std::get<0>(fetched), now);
    if (auto* bad = std::get_if<std::string>(&verdict)) {
      why = *bad;
    } else if (auto& r = std::get<ocsp::Response>(verdict); r.status == ocsp::CertStatus::unknown) {
      why = "the responder does not know the certificate (status unknown)";
    } else {
      if (r.status == ocsp::CertStatus::revoked)
        spdlog::error("OCSP: '{}' is REVOKED, says {}; the revocation is stapled", staple.cert_file(),
                      w.subject.responder());
      else if (!current || current->status != r.status || w.failures > 0)
        spdlog::info("OCSP: '{}' is good, stapled", staple.cert_file());
      w.failures = 0;
      auto published = std::make_shared<const ocsp::Response>(std::move(r));
      staple.publish(published);
      co_return ocsp::refresh_after(*published, now);
    }
  }
  staple.count_failure();
  ++w.failures;
  const bool still = current && ocsp::stapleable(*current, now);
  spdlog::warn("OCSP: '{}': {}: {}; {}", staple.cert_file(), w.subject.responder(), why,
               still ? "the previous response is stapled until it expires" : "no staple");
  co_return ocsp::retry_after(w.failures, current.get(), now);
}

// Fetches until the staple is no longer used or the stapler stops.
net::awaitable<void> keep_fresh(std::shared_ptr<OcspStapler::Watched> w) {
  while (!w->stopped) {
    ocsp::UnixTime delay = 0;
    {
      const auto staple = w->staple.lock();  // not held while waiting for the next fetch
      if (!staple) co_return;
      delay = co_await refresh(*w, *staple);
    }
    if (w->stopped) co_return;
    w->timer.expires_after(std::chrono::seconds(delay));
    co_await w->timer.async_wait(nothrow);
  }
}

}  // namespace

void staple_from(SSL_CTX* ctx, const OcspStaple* staple) {
  SSL_CTX_set_tlsext_status_cb(ctx, staple_status);
  SSL_CTX_set_tlsext_status_arg(ctx, const_cast<OcspStaple*>(staple));
}

OcspStapler::~OcspStapler() { stop(); }

std::shared_ptr<OcspStaple> OcspStapler::watch(const std::string& cert_file,
                                               const std::string& responder_override) {
  std::string why;
  auto subject = ocsp::Subject::from_chain_file(cert_file, responder_override, why);
  if (!subject) {
    if (responder_override.empty() && why.find("no http:// OCSP responder") != std::string::npos)
      spdlog::debug("OCSP: '{}': {}: not stapled", cert_file, why);
    else
      spdlog::warn("OCSP: '{}': {}: not stapled", cert_file, why);
    return nullptr;
  }
  // Certificates no listener uses any more stop being fetched.
  std::erase_if(watched_, [](const auto& entry) {
    if (!entry.second->staple.expired()) return false;
    entry.second->cancel();
    return true;
  });
  const auto identity = subject->identity();
  if (auto it = watched_.find(identity); it != watched_.end()) return it->second->staple.lock();
  auto url = ocsp::parse_http_url(subject->responder());
  if (!url) return nullptr;  // the config loader checked an override; AIA URLs are filtered
  auto w = std::make_shared<Watched>(io_, std::move(*subject), std::move(*url));
  auto staple = std::make_shared<OcspStaple>(cert_file);
  w->staple = staple;
  watched_.emplace(identity, w);
  if (!stopped_) net::co_spawn(io_, keep_fresh(w), net::detached);
  return staple;
}

std::vector<std::shared_ptr<const OcspStaple>> OcspStapler::staples() const {
  std::vector<std::shared_ptr<const OcspStaple>> out;
  for (const auto& [identity, w] : watched_)
    if (auto staple = w->staple.lock()) out.push_back(std::move(staple));
  return out;
}

void OcspStapler::stop() {
  stopped_ = true;
  for (auto& [identity, w] : watched_) w->cancel();
}

}  // namespace sluice::tls
