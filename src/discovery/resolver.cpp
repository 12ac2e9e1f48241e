#include "sluice/discovery/resolver.hpp"

#include <ares.h>
#include <arpa/nameser.h>
#include <netinet/in.h>

#include <algorithm>
#include <stdexcept>

namespace sluice::discovery {

namespace net = boost::asio;

namespace {

ares_channel channel_of(void* c) { return static_cast<ares_channel>(c); }

Answer failure(int status) {
  Answer a;
  // RFC 2308 §2.2: NODATA (the name exists, no record of the type) is an empty answer; NXDOMAIN,
  // SERVFAIL, timeouts and refusals are failures.
  a.outcome = status == ARES_ENODATA ? Outcome::empty : Outcome::failed;
  a.error = ares_strerror(status);
  return a;
}

// The smallest TTL among the answer records of `type` (c-ares's SRV parser drops the TTLs).
// RFC 1035 §4.1: header, questions (name, type, class), then resource records.
std::chrono::seconds min_answer_ttl(const unsigned char* buf, int len, int type) {
  if (len < 12) return std::chrono::seconds(0);
  const int questions = (buf[4] << 8) | buf[5];
  const int answers = (buf[6] << 8) | buf[7];
  const unsigned char* p = buf + 12;
  const unsigned char* end = buf + len;
  const auto skip_name = [&]() -> bool {
    char* name = nullptr;
    long used = 0;
    if (ares_expand_name(p, buf, len, &name, &used) != ARES_SUCCESS) return false;
    ares_free_string(name);
    p += used;
    return p <= end;
  };
  for (int i = 0; i < questions; ++i)
    if (!skip_name() || (p += 4) > end) return std::chrono::seconds(0);
  std::uint32_t best = UINT32_MAX;
  for (int i = 0; i < answers; ++i) {
    if (!skip_name() || p + 10 > end) break;
    const int rr_type = (p[0] << 8) | p[1];
    const std::uint32_t ttl = (std::uint32_t{p[4]} << 24) | (p[5] << 16) | (p[6] << 8) | p[7];
    const int rdlength = (p[8] << 8) | p[9];
    p += 10 + rdlength;
    if (rr_type == type) best = std::min(best, ttl);
  }
  return std::chrono::seconds(best == UINT32_MAX ? 0 : best);
}

struct HostQuery {
  std::string host;
  Resolver::Done done;
  std::shared_ptr<bool> alive;
};

void on_addrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* res) {
  std::unique_ptr<HostQuery> q(static_cast<HostQuery*>(arg));
  if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED || !*q->alive) {
    if (res != nullptr) ares_freeaddrinfo(res);
    return;
  }
  Answer a = status == ARES_SUCCESS ? Answer{Outcome::ok, {}, {}, {}} : failure(status);
  if (status == ARES_SUCCESS && res != nullptr) {
    std::uint32_t ttl = UINT32_MAX;
    for (auto* n = res->nodes; n != nullptr; n = n->ai_next) {
      Record r{q->host, {}, 0, 0, 0};
      if (n->ai_family == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(n->ai_addr);
        r.ip = net::ip::address_v4(ntohl(sin->sin_addr.s_addr));
      } else if (n->ai_family == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(n->ai_addr);
        net::ip::address_v6::bytes_type bytes;
        std::copy_n(sin6->sin6_addr.s6_addr, 16, bytes.begin());
        r.ip = net::ip::address_v6(bytes);
      } else {
        continue;
      }
      ttl = std::min<std::uint32_t>(ttl, static_cast<std::uint32_t>(std::max(0, n->ai_ttl)));
      a.records.push_back(std::move(r));
    }
    a.ttl = std::chrono::seconds(ttl == UINT32_MAX ? 0 : ttl);
    if (a.records.empty()) a.outcome = Outcome::empty;
  }
  if (res != nullptr) ares_freeaddrinfo(res);
  q->done(std::move(a));
}

// An SRV answer waits for the addresses of its targets.
struct SrvQuery {
  Resolver* resolver;
  Resolver::Done done;
  std::shared_ptr<bool> alive;
};

struct SrvJoin {
  Answer answer;
  std::size_t pending = 0;
  std::string first_error;
  Resolver::Done done;
};

void on_srv(void* arg, int status, int /*timeouts*/, unsigned char* buf, int len) {
  std::unique_ptr<SrvQuery> q(static_cast<SrvQuery*>(arg));
  if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED || !*q->alive) return;
  ares_srv_reply* reply = nullptr;
  if (status == ARES_SUCCESS) status = ares_parse_srv_reply(buf, len, &reply);
  if (status != ARES_SUCCESS) return q->done(failure(status));
  auto join = std::make_shared<SrvJoin>();
  join->done = std::move(q->done);
  join->answer.outcome = Outcome::ok;
  join->answer.ttl = min_answer_ttl(buf, len, ns_t_srv);
  struct Target { std::string host; std::uint16_t port, priority, weight; };
  std::vector<Target> targets;
  for (auto* r = reply; r != nullptr; r = r->next) {
    std::string host = r->host;
    if (!host.empty() && host.back() == '.') host.pop_back();
    if (host.empty()) continue;  // RFC 2782: target "." = the service is not available here
    targets.push_back({std::move(host), r->port, r->priority, r->weight});
  }
  ares_free_data(reply);
  if (targets.empty()) return join->done(failure(ARES_ENODATA));
  join->pending = targets.size();
  for (const auto& t : targets) {
    q->resolver->resolve_host(t.host, [join, t](Answer a) {
      if (a.outcome == Outcome::ok) {
        join->answer.ttl = std::min(join->answer.ttl, a.ttl);
        for (auto& r : a.records) join->answer.records.push_back({t.host, r.ip, t.port, t.priority, t.weight});
      } else if (join->first_error.empty()) {
        join->first_error = t.host + ": " + a.error;
      }
      if (--join->pending != 0) return;
      // A target that does not resolve is left out; the answer fails only when none does.
      if (join->answer.records.empty()) {
        join->answer.outcome = Outcome::failed;
        join->answer.error = join->first_error;
      }
      join->done(std::move(join->answer));
    });
  }
}

std::string servers_csv(const std::vector<config::HostPort>& servers) {
  std::string csv;
  for (const auto& s : servers) csv += (csv.empty() ? "" : ",") + s.to_string();
  return csv;
}

}  // namespace

Resolver::Resolver(net::io_context& io, const config::DnsSection& dns) : io_(io), timer_(io) {
  static const int library = ares_library_init(ARES_LIB_INIT_ALL);
  if (library != ARES_SUCCESS) throw std::runtime_error(std::string("c-ares: ") + ares_strerror(library));
  ares_options options{};
  options.timeout = static_cast<int>(dns.timeout.count());
  options.tries = static_cast<int>(dns.attempts);
  options.sock_state_cb = [](void* self, ares_socket_t fd, int readable, int writable) {
    static_cast<Resolver*>(self)->on_socket_state(fd, readable != 0, writable != 0);
  };
  options.sock_state_cb_data = this;
  ares_channel channel = nullptr;
  const int rc = ares_init_options(&channel, &options, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_SOCK_STATE_CB);
  if (rc != ARES_SUCCESS) throw std::runtime_error(std::string("c-ares: ") + ares_strerror(rc));
  channel_ = channel;
  if (!dns.servers.empty()) {
    const int set = ares_set_servers_ports_csv(channel, servers_csv(dns.servers).c_str());
    if (set != ARES_SUCCESS) {
      ares_destroy(channel);
      throw std::runtime_error(std::string("c-ares: dns.servers: ") + ares_strerror(set));
    }
  }
}

Resolver::~Resolver() {
  *alive_ = false;  // queries answered with ARES_EDESTRUCTION call nobody back
  ares_destroy(channel_of(channel_));
  for (auto& [fd, w] : sockets_) w.descriptor->release();  // c-ares closes its own sockets
}

void Resolver::cancel() {
  *alive_ = false;  // ARES_ECANCELLED answers call nobody back
  ares_cancel(channel_of(channel_));
  timer_.cancel();
}

void Resolver::resolve_host(const std::string& host, Done done) {
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = ARES_AI_NOSORT;  // the order does not matter: servers are sorted by identity
  auto* q = new HostQuery{host, std::move(done), alive_};
  ares_getaddrinfo(channel_of(channel_), host.c_str(), nullptr, &hints, on_addrinfo, q);
  schedule_timeout();
}

void Resolver::resolve_srv(const std::string& name, Done done) {
  auto* q = new SrvQuery{this, std::move(done), alive_};
  ares_query(channel_of(channel_), name.c_str(), ns_c_in, ns_t_srv, on_srv, q);
  schedule_timeout();
}

void Resolver::on_socket_state(int fd, bool readable, bool writable) {
  if (!readable && !writable) {
    // c-ares closes the socket right after: give it back unclosed, cancelling our waits.
    if (auto it = sockets_.find(fd); it != sockets_.end()) {
      it->second.descriptor->release();
      sockets_.erase(it);
    }
    return;
  }
  auto& w = sockets_[fd];
  if (!w.descriptor) {
    w.descriptor = std::make_unique<net::posix::stream_descriptor>(io_, fd);
    w.generation = ++generation_;
  }
  w.want_read = readable;
  w.want_write = writable;
  arm(fd);
}

void Resolver::arm(int fd) {
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return;
  auto& w = it->second;
  const auto wait = [this, fd, generation = w.generation, alive = alive_](bool read) {
    return [this, fd, generation, alive, read](boost::system::error_code ec) {
      if (!*alive) return;
      auto found = sockets_.find(fd);
      if (found == sockets_.end() || found->second.generation != generation) return;
      (read ? found->second.reading : found->second.writing) = false;
      if (ec) return;
      process(read ? fd : ARES_SOCKET_BAD, read ? ARES_SOCKET_BAD : fd);
      arm(fd);
    };
  };
  if (w.want_read && !w.reading) {
    w.reading = true;
    w.descriptor->async_wait(net::posix::descriptor_base::wait_read, wait(true));
  }
  if (w.want_write && !w.writing) {
    w.writing = true;
    w.descriptor->async_wait(net::posix::descriptor_base::wait_write, wait(false));
  }
}

void Resolver::process(int read_fd, int write_fd) {
  ares_process_fd(channel_of(channel_), read_fd, write_fd);
  schedule_timeout();
}

void Resolver::schedule_timeout() {
  timeval tv{};
  if (ares_timeout(channel_of(channel_), nullptr, &tv) == nullptr) {
    timer_.cancel();
    return;
  }
  timer_.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
  timer_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    process(ARES_SOCKET_BAD, ARES_SOCKET_BAD);
  });
}

}  // namespace sluice::discovery
