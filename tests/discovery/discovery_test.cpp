// Discovery: a config's `resolve` servers and `discover` SRV names, resolved through c-ares
// against a DNS server on loopback that the test controls (its records, and whether and when it
// answers), never the machine's resolver. What is asserted is what the runtime builds snapshots
// from: expand(), on_change, settled(), failures(), a reload's make-before-break, and the report
// of `sluice check --resolve`. Schedules and staleness are unit-tested in source_test.cpp.
#include "sluice/discovery/discovery.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/udp.hpp>
#include <gtest/gtest.h>

namespace sluice::discovery {
namespace {

namespace net = boost::asio;
using udp = net::ip::udp;
using namespace std::chrono_literals;

constexpr std::uint16_t type_a = 1, type_aaaa = 28, type_srv = 33;

struct Srv {
  std::uint16_t priority, weight, port;
  std::string target;
};

// A DNS server for the test's names: A records, SRV records, SERVFAIL for names in `failing`,
// and no answer yet for names in `held` (their queries wait until release()).
class FakeDns {
public:
  explicit FakeDns(net::io_context& io) : socket_(io, {net::ip::make_address("127.0.0.1"), 0}) { receive(); }
  std::uint16_t port() const { return socket_.local_endpoint().port(); }

  std::map<std::string, std::vector<std::string>> a;  // name -> IPv4 addresses
  std::map<std::string, std::vector<Srv>> srv;
  std::set<std::string> failing, held;
  std::uint32_t ttl = 30;
  std::map<std::string, int> queries;  // name -> queries of any type

  void release(const std::string& name) {
    held.erase(name);
    for (auto& [query, from] : waiting_)
      if (name_of(query) == name) send(query, from);
    std::erase_if(waiting_, [&](const auto& w) { return name_of(w.first) == name; });
  }

private:
  static std::string name_of(const std::string& q) {
    std::string name;
    for (std::size_t at = 12; at < q.size() && q[at] != 0; at += 1 + static_cast<unsigned char>(q[at])) {
      if (!name.empty()) name += '.';
      name += q.substr(at + 1, static_cast<unsigned char>(q[at]));
    }
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
  }
  static std::size_t question_end(const std::string& q) {
    std::size_t at = 12;
    while (q[at] != 0) at += 1 + static_cast<unsigned char>(q[at]);
    return at + 1 + 4;  // the root label, QTYPE, QCLASS
  }
  static void put16(std::string& out, unsigned v) {
    out += static_cast<char>(v >> 8);
    out += static_cast<char>(v & 0xff);
  }
  static void put_name(std::string& out, const std::string& name) {
    std::size_t from = 0;
    while (from < name.size()) {
      const auto dot = std::min(name.find('.', from), name.size());
      out += static_cast<char>(dot - from);
      out += name.substr(from, dot - from);
      from = dot + 1;
    }
    out += '\0';
  }

  void receive() {
    socket_.async_receive_from(net::buffer(buffer_), from_, [this](boost::system::error_code ec, std::size_t n) {
      if (ec) return;
      std::string query(buffer_.data(), n);
      const auto name = name_of(query);
      ++queries[name];
      if (held.contains(name)) waiting_.emplace_back(query, from_);
      else send(query, from_);
      receive();
    });
  }

  void send(const std::string& query, const udp::endpoint& to) {
    const auto end = question_end(query);
    const auto name = name_of(query);
    const unsigned type = (static_cast<unsigned char>(query[end - 4]) << 8) | static_cast<unsigned char>(query[end - 3]);
    std::vector<std::string> rdata;
    if (type == type_a && a.contains(name))
      for (const auto& text : a.at(name)) {
        const auto bytes = net::ip::make_address_v4(text).to_bytes();
        rdata.emplace_back(bytes.begin(), bytes.end());
      }
    if (type == type_srv && srv.contains(name))
      for (const auto& r : srv.at(name)) {
        std::string d;
        put16(d, r.priority);
        put16(d, r.weight);
        put16(d, r.port);
        put_name(d, r.target);
        rdata.push_back(d);
      }
    std::string out = query.substr(0, 2);                   // the query's id
    put16(out, 0x8180 | (failing.contains(name) ? 2 : 0));  // response, RD, RA; SERVFAIL
    put16(out, 1);
    put16(out, failing.contains(name) ? 0 : static_cast<unsigned>(rdata.size()));
    put16(out, 0);
    put16(out, 0);
    out += query.substr(12, end - 12);
    if (!failing.contains(name))
      for (const auto& d : rdata) {
        put16(out, 0xc00c);  // the name of the question
        put16(out, type);
        put16(out, 1);  // IN
        put16(out, ttl >> 16);
        put16(out, ttl & 0xffff);
        put16(out, static_cast<unsigned>(d.size()));
        out += d;
      }
    socket_.send_to(net::buffer(out), to);
    (void)type_aaaa;  // AAAA: no records (NODATA), as for an IPv4-only service
  }

  udp::socket socket_;
  std::array<char, 1500> buffer_;
  udp::endpoint from_;
  std::vector<std::pair<std::string, udp::endpoint>> waiting_;
};

config::ServerConfig fixed(std::string host, std::uint16_t port) {
  config::ServerConfig s;
  s.address = {std::move(host), port};
  s.name = s.address.to_string();
  return s;
}

config::ServerConfig resolved(std::string host, std::uint16_t port) {
  auto s = fixed(std::move(host), port);
  s.name.clear();
  s.resolve = true;
  return s;
}

std::vector<std::string> names(const config::Config& c, const std::string& upstream) {
  std::vector<std::string> out;
  for (const auto& s : c.find_upstream(upstream)->servers) out.push_back(s.name.empty() ? s.address.to_string() : s.name);
  return out;
}

struct DiscoveryTest : ::testing::Test {
  net::io_context io;
  FakeDns dns{io};
  ManualClock clock;
  config::Config config;
  std::vector<std::string> changes;  // "upstream name +added -removed"
  std::unique_ptr<Discovery> discovery;

  DiscoveryTest() {
    config.dns.servers = {{"127.0.0.1", dns.port()}};
    config.dns.timeout = 2s;
    config.dns.attempts = 1;
    dns.a["app.test"] = {"10.0.0.2", "10.0.0.1"};
  }

  void start() {
    discovery = std::make_unique<Discovery>(io, clock, config.dns);
    discovery->on_change = [this](const std::string& upstream, const std::string& name, const Change& c) {
      std::string text = upstream + " " + name;
      for (const auto& s : c.added) text += " +" + s;
      for (const auto& s : c.removed) text += " -" + s;
      changes.push_back(text);
    };
    discovery->configure(config);
  }

  // Runs the loop until `done` (bounded: a lost answer fails the test, not the run).
  template <class Done> bool run_until(Done done) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < until) io.run_one_for(100ms);
    return done();
  }

  config::UpstreamConfig& upstream(std::string name, std::vector<config::ServerConfig> servers) {
    config::UpstreamConfig u;
    u.name = std::move(name);
    u.servers = std::move(servers);
    config.upstreams.push_back(std::move(u));
    return config.upstreams.back();
  }

  ~DiscoveryTest() override {
    if (discovery) discovery->stop();
  }
};

TEST_F(DiscoveryTest, AResolveServerBecomesEveryAddressOfItsNameInItsPlace) {
  upstream("app", {fixed("127.0.0.9", 80), resolved("app.test", 8080), fixed("127.0.0.8", 80)});
  start();
  EXPECT_FALSE(discovery->settled()) << "nothing has answered yet";
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  const auto expanded = discovery->expand(std::make_shared<const config::Config>(config));
  EXPECT_EQ(names(*expanded, "app"), (std::vector<std::string>{"127.0.0.9:80", "app.test@10.0.0.1:8080",
                                                               "app.test@10.0.0.2:8080", "127.0.0.8:80"}));
  EXPECT_EQ(changes, (std::vector<std::string>{"app app.test +app.test@10.0.0.1:8080 +app.test@10.0.0.2:8080"}));
  EXPECT_TRUE(discovery->failures().empty());
}

TEST_F(DiscoveryTest, AConfigWithoutNamesIsLeftAsItIs) {
  upstream("app", {fixed("127.0.0.9", 80)});
  start();
  EXPECT_TRUE(discovery->settled());
  const auto snapshot = std::make_shared<const config::Config>(config);
  EXPECT_EQ(discovery->expand(snapshot), snapshot) << "no copy when nothing is discovered";
  EXPECT_EQ(dns.queries.size(), 0u);
}

TEST_F(DiscoveryTest, SrvRecordsAreAppendedWithTheirPortsWeightsAndBackups) {
  dns.srv["_http._tcp.app.test"] = {{10, 5, 8081, "a.app.test"}, {10, 0, 8082, "b.app.test"},
                                    {20, 1, 8083, "c.app.test"}};
  dns.a["a.app.test"] = {"10.0.1.1"};
  dns.a["b.app.test"] = {"10.0.1.2"};
  dns.a["c.app.test"] = {"10.0.1.3"};
  upstream("app", {fixed("127.0.0.9", 80)}).discover_srv = "_http._tcp.app.test";
  start();
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  const auto expanded = discovery->expand(std::make_shared<const config::Config>(config));
  const auto& servers = expanded->find_upstream("app")->servers;
  ASSERT_EQ(servers.size(), 4u);
  EXPECT_EQ(servers[0].name, "127.0.0.9:80");
  EXPECT_EQ(servers[1].name, "a.app.test@10.0.1.1:8081");
  EXPECT_EQ(servers[1].weight, 5u);
  EXPECT_EQ(servers[2].name, "b.app.test@10.0.1.2:8082");
  EXPECT_EQ(servers[2].weight, 1u) << "SRV weight 0 is sluice's smallest weight";
  EXPECT_FALSE(servers[2].backup);
  EXPECT_EQ(servers[3].name, "c.app.test@10.0.1.3:8083");
  EXPECT_TRUE(servers[3].backup) << "a higher SRV priority is a backup";
}

TEST_F(DiscoveryTest, ANameThatFailsSettlesWithNoServersAndSaysWhy) {
  dns.failing.insert("app.test");
  upstream("app", {resolved("app.test", 8080)});
  start();
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  const auto failures = discovery->failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rfind("app: app.test: ", 0), 0u) << failures[0];
  EXPECT_GT(failures[0].size(), std::string("app: app.test: ").size()) << "the resolver's reason";
  EXPECT_TRUE(names(*discovery->expand(std::make_shared<const config::Config>(config)), "app").empty());
  EXPECT_TRUE(changes.empty()) << "no membership changed";
}

TEST_F(DiscoveryTest, AReloadKeepsTheDroppedNamesServersUntilTheNewNameAnswers) {
  dns.a["new.test"] = {"10.0.0.7"};
  upstream("app", {resolved("app.test", 8080)});
  start();
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  changes.clear();

  dns.held.insert("new.test");
  config.upstreams[0].servers = {resolved("new.test", 8080)};
  discovery->configure(config);
  discovery->prune();  // the reload succeeded
  ASSERT_TRUE(run_until([&] { return dns.queries["new.test"] > 0; }));
  EXPECT_FALSE(discovery->settled());
  EXPECT_EQ(names(*discovery->expand(std::make_shared<const config::Config>(config)), "app"),
            (std::vector<std::string>{"app.test@10.0.0.1:8080", "app.test@10.0.0.2:8080"}))
      << "make before break: the upstream is never empty while the new name is out";

  dns.release("new.test");
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  EXPECT_EQ(names(*discovery->expand(std::make_shared<const config::Config>(config)), "app"),
            (std::vector<std::string>{"new.test@10.0.0.7:8080"}));
  ASSERT_EQ(changes.size(), 1u) << "one change: the swap";
  EXPECT_EQ(changes[0], "app new.test +new.test@10.0.0.7:8080");
}

TEST_F(DiscoveryTest, AFailedReloadConfiguredBackLosesNothingAndAsksNothingAgain) {
  dns.a["new.test"] = {"10.0.0.7"};
  upstream("app", {resolved("app.test", 8080)});
  start();
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  const auto running = config;
  config.upstreams[0].servers = {resolved("new.test", 8080)};
  discovery->configure(config);  // the reload fails after this: the running config comes back
  discovery->configure(running);
  ASSERT_TRUE(run_until([&] { return dns.queries["new.test"] > 0; }));
  discovery->prune();
  EXPECT_TRUE(discovery->settled());
  EXPECT_EQ(names(*discovery->expand(std::make_shared<const config::Config>(running)), "app"),
            (std::vector<std::string>{"app.test@10.0.0.1:8080", "app.test@10.0.0.2:8080"}));
  EXPECT_EQ(dns.queries["app.test"], 2) << "A and AAAA once: the kept name was not asked again";
  EXPECT_TRUE(discovery->status("app").size() == 1u) << "the dropped name is gone after prune()";
}

TEST_F(DiscoveryTest, StatusAndSourcesDescribeEachName) {
  upstream("app", {resolved("app.test", 8080)});
  start();
  ASSERT_TRUE(run_until([&] { return discovery->settled(); }));
  const auto status = discovery->status("app");
  ASSERT_EQ(status.size(), 1u);
  const auto& s = status[0].as_object();
  EXPECT_EQ(s.at("kind").as_string(), "dns");
  EXPECT_EQ(s.at("name").as_string(), "app.test");
  EXPECT_EQ(s.at("servers").to_number<int>(), 2);
  EXPECT_EQ(s.at("ttl_s").to_number<int>(), 30);
  EXPECT_EQ(s.at("next_query_ms").to_number<double>(), 30'000.0) << "on the manual clock, at the TTL";
  EXPECT_FALSE(s.at("stale").as_bool());

  const auto sources = discovery->sources();
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_EQ(sources[0]->upstream(), "app");
  EXPECT_EQ(sources[0]->name(), "app.test");
  EXPECT_EQ(sources[0]->resolutions(Outcome::ok), 1u);
  EXPECT_EQ(sources[0]->resolutions(Outcome::failed), 0u);
  EXPECT_EQ(sources[0]->servers().size(), 2u);
  EXPECT_EQ(sources[0]->changes(), 1u);
}

TEST_F(DiscoveryTest, StopLeavesNothingToRunAndNoCallback) {
  dns.held.insert("app.test");
  upstream("app", {resolved("app.test", 8080)});
  start();
  ASSERT_TRUE(run_until([&] { return dns.queries["app.test"] > 0; }));
  discovery->stop();
  dns.release("app.test");
  for (int i = 0; i < 50 && io.poll() > 0;) ++i;
  EXPECT_TRUE(changes.empty());
  EXPECT_FALSE(discovery->settled()) << "the answer after stop() is not applied";
}

TEST_F(DiscoveryTest, ResolveOnceReportsEveryServerAndEveryFailure) {
  dns.failing.insert("gone.test");
  upstream("app", {resolved("app.test", 8080)});
  upstream("old", {resolved("gone.test", 80)});
  ResolveReport report;
  std::atomic<bool> reported = false;
  std::thread check([&] {  // resolve_once runs its own loop; ours answers it
    report = resolve_once(config);
    reported = true;
  });
  while (!reported) {
    io.run_one_for(50ms);
    if (io.stopped()) io.restart();
  }
  check.join();
  EXPECT_EQ(report.failed, 1u);
  ASSERT_EQ(report.lines.size(), 3u);
  EXPECT_EQ(report.lines[0], "upstream app: server app.test@10.0.0.1:8080 weight 1 (dns app.test, ttl 30s)");
  EXPECT_EQ(report.lines[1], "upstream app: server app.test@10.0.0.2:8080 weight 1 (dns app.test, ttl 30s)");
  EXPECT_EQ(report.lines[2].rfind("upstream old: dns gone.test: ", 0), 0u) << report.lines[2];
  EXPECT_TRUE(report.lines[2].ends_with("; no servers")) << report.lines[2];
}

}  // namespace
}  // namespace sluice::discovery
