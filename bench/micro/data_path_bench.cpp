// The per-request CPU work of the data path outside the sockets, step by step as
// src/proxy/session.cpp does it: request head (strict scan, Beast parse into the arena-allocated
// message types, framing checks, routing, X-Request-Id, rewrite, serialisation towards the
// origin), response head (scan, parse, checks, rewrite, serialisation towards the client) and the
// per-request accounting (EndpointCounters). Every benchmark reports allocs/op: calls of the
// global operator new made inside the timed loop, divided by iterations (the replacement below
// counts them for the whole binary). Results: bench/results/micro-<date>.md.
//
// BM_Index*: the same request and response steps over the head index and the splice writers
// (http/head_index.hpp, issue 17 point 3), the path the session is to take; results in
// bench/results/micro-2026-12-01-head-index.md.
//
// Every step calls the function the session calls (http/head.hpp, http/strict.hpp,
// http/rewrite.hpp); only the order of the calls is restated here. If session.cpp's sequence
// changes, change run_request()/run_response() to match.
#include <benchmark/benchmark.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/field.hpp>

#include "sluice/core/arena.hpp"
#include "sluice/core/clock.hpp"
#include "oracle/beast_head.hpp"
#include "sluice/http/head.hpp"
#include "sluice/http/head_index.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/request_id.hpp"
#include "sluice/http/rewrite.hpp"
#include "sluice/http/strict.hpp"
#include "sluice/proxy/router.hpp"
#include "sluice/proxy/worker_context.hpp"
#include "sluice/endpoint/endpoint.hpp"
#include "sluice/telemetry/access_log.hpp"

// ---- allocation counting -------------------------------------------------------------------
// Replaces the global allocation functions of this program: every operator new (plain, array,
// aligned, nothrow) bumps one counter. Relaxed atomic: the balancer benchmarks run two threads.
namespace {
std::atomic<std::uint64_t> g_allocations{0};

void* counted_alloc(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* counted_alloc(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  void* p = std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted_alloc(n); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted_alloc(n); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

using namespace sluice;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;

// Counts the allocations of the timed loop: construct before it, call done() after it.
class AllocScope {
public:
  explicit AllocScope(benchmark::State& state)
      : state_(state), start_(g_allocations.load(std::memory_order_relaxed)) {}
  void done() {
    const auto n = g_allocations.load(std::memory_order_relaxed) - start_;
    state_.counters["allocs/op"] =
        benchmark::Counter(static_cast<double>(n), benchmark::Counter::kAvgIterations);
  }

private:
  benchmark::State& state_;
  std::uint64_t start_;
};

// A typical browser navigation (Firefox 120 shape, with a session cookie): 600 bytes.
constexpr std::string_view browser_request =
    "GET /products/shoes/running?color=blue&size=42&sort=price HTTP/1.1\r\n"
    "Host: shop.example.com\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n"
    "Accept-Language: en-US,en;q=0.5\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Referer: https://shop.example.com/products/shoes\r\n"
    "Connection: keep-alive\r\n"
    "Cookie: session=3f2a9c1e7b5d4a6f8e0c2b1a9d7f5e3c; theme=dark; consent=1\r\n"
    "Upgrade-Insecure-Requests: 1\r\n"
    "Sec-Fetch-Dest: document\r\n"
    "Sec-Fetch-Mode: navigate\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-User: ?1\r\n"
    "\r\n";
static_assert(browser_request.size() >= 580 && browser_request.size() <= 620);

// What wrk sends in the side-by-side benchmark.
constexpr std::string_view wrk_request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

// The origin's answer in the side-by-side `small` scenario (nginx `return 200`), and a typical
// application response head.
constexpr std::string_view small_response =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Sun, 30 Nov 2026 09:00:00 GMT\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 6\r\n"
    "Connection: keep-alive\r\n"
    "\r\n";
constexpr std::string_view app_response =
    "HTTP/1.1 200 OK\r\n"
    "Date: Sun, 30 Nov 2026 09:00:00 GMT\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "Content-Length: 18234\r\n"
    "Connection: keep-alive\r\n"
    "Keep-Alive: timeout=5\r\n"
    "Cache-Control: private, max-age=0, must-revalidate\r\n"
    "ETag: \"5f3a-1b2c3d4e\"\r\n"
    "Vary: Accept-Encoding, Cookie\r\n"
    "Set-Cookie: session=3f2a9c1e7b5d4a6f8e0c2b1a9d7f5e3c; Path=/; HttpOnly; SameSite=Lax\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "\r\n";

// ---- the per-worker / per-session state the sequence uses ----------------------------------
struct Worker {
  BlockPool arena_blocks{proxy::arena_block_size, 128};
  http::RequestIdGenerator ids{42};
  // The benchmark's config: no routes, one upstream takes everything. The pointer is only
  // compared, never followed.
  Router router{{}, reinterpret_cast<const Upstream*>(&arena_blocks)};
  std::string client_ip = "127.0.0.1";
  std::size_t max_header_bytes = 16 * 1024;  // config defaults (docs/configuration.md)
  std::size_t max_uri_bytes = 8 * 1024;
  std::string head_out;  // per session in session.cpp, reused across its requests
  Arena arena;           // per session, attached to a pooled block per exchange
  std::optional<http::RequestParser> request;
  std::optional<http::ResponseParser> response;
  http::RequestHead request_index;  // the head index path (http/head_index.hpp): no arena needed
  http::ResponseHead response_index;
  char id_storage[129];
  std::string_view request_id;
  bool use_arena = true;  // false: Beast's fields on the heap (what the arena saves)
  // Set: the route's edge rules (docs/edge.md) are applied as Session::write_request_head() and
  // write_response_head() do.
  const Router::Route* edge = nullptr;

  Worker() {
    arena_blocks.reserve();
    head_out.reserve(1024);
  }
  void begin_exchange() {
    if (use_arena) arena.attach(arena_blocks.acquire(), proxy::arena_block_size);
  }
  void end_exchange() {
    request.reset();
    response.reset();
    if (use_arena) arena_blocks.release(arena.detach());
  }
};

enum class Stage { scan, parse, full };

// A route with header rules on both sides (literals and every variable) and a path rewrite.
Router::Route edge_route() {
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  Router::Route r;
  r.path_prefix = "/products/";
  r.request_rules.apply(std::vector<std::string>{"Cookie"}, Pairs{{"X-Env", "prod"}},
                        Pairs{{"Via", "1.1 sluice"}, {"X-Client", "$client_ip $request_id $host $request_uri"}});
  r.response_rules.apply(std::vector<std::string>{"Server"},
                         Pairs{{"X-Served-By", "$server"}, {"Strict-Transport-Security", "max-age=31536000"}},
                         Pairs{{"X-Config", "$upstream $config_version"}});
  r.rewrite = http::PathRewrite{10, "/"};
  return r;
}

// Session::rule_variables().
http::Variables edge_variables(const Worker& w, const http::RequestHeader* req) {
  using V = http::Variable;
  http::Variables v;
  v[V::request_id] = w.request_id;
  v[V::client_ip] = w.client_ip;
  v[V::upstream] = "app";
  v[V::server] = "app-1";
  v[V::config_version] = "1";
  if (req != nullptr) {
    v[V::host] = http::host_without_port((*req)[bhttp::field::host]);
    v[V::request_uri] = http::path_of(req->target());
  }
  return v;
}

// read_request_head() + handle_request() + forward() + send_request(), without the I/O.
[[gnu::noinline]] bool run_request(Worker& w, std::string_view bytes, Stage stage) {
  const auto scan = http::scan_request_head(bytes, w.max_header_bytes, w.max_uri_bytes);
  if (scan.result != http::HeadScan::Result::complete) return false;
  if (stage == Stage::scan) return true;
  w.begin_exchange();
  w.request.emplace(std::piecewise_construct, std::make_tuple(),
                    std::make_tuple(http::Allocator(&w.arena)));
  if (http::parse_request_head(*w.request, bytes.substr(0, scan.head_size))) return false;
  auto& req = w.request->get();
  if (stage == Stage::parse) {
    w.end_exchange();
    return true;
  }
  // handle_request()
  {
    char generated[37];
    const auto id = http::choose_request_id(req, w.ids, generated);
    const auto n = std::min(id.size(), sizeof w.id_storage);
    std::memcpy(w.id_storage, id.data(), n);
    w.request_id = std::string_view(w.id_storage, n);
  }
  bool keep = w.request->keep_alive();
  benchmark::DoNotOptimize(keep);
  benchmark::DoNotOptimize(w.request->is_done());
  benchmark::DoNotOptimize(w.request->content_length());
  if (req.method() == bhttp::verb::connect) return false;
  const auto* upstream = w.router.route(req[bhttp::field::host], http::path_of(req.target()));
  benchmark::DoNotOptimize(upstream);
  // forward()
  if (const auto e = req[bhttp::field::expect]; !e.empty()) req.erase(bhttp::field::expect);
  bool chunked = w.request->chunked();
  bool idempotent = http::is_idempotent(req.method());
  benchmark::DoNotOptimize(chunked);
  benchmark::DoNotOptimize(idempotent);
  http::rewrite_request(req, {w.client_ip, "http", w.request_id});
  // send_request()
  w.head_out.clear();
  if (w.edge != nullptr) {
    const auto vars = edge_variables(w, &req);
    http::append_request_head(w.head_out, req, chunked, {&*w.edge->rewrite, &w.edge->request_rules, &vars});
  } else {
    http::append_request_head(w.head_out, req, chunked);
  }
  benchmark::DoNotOptimize(w.head_out.data());
  w.end_exchange();
  return true;
}

// read_response_head() + send_response()'s head, without the I/O. The request's arena is
// attached (the response is parsed into the same one).
[[gnu::noinline]] bool run_response(Worker& w, std::string_view bytes, Stage stage) {
  const auto scan = http::scan_response_head(bytes, w.max_header_bytes);
  if (scan.result != http::HeadScan::Result::complete) return false;
  if (stage == Stage::scan) return true;
  w.begin_exchange();
  w.response.emplace(std::piecewise_construct, std::make_tuple(),
                     std::make_tuple(http::Allocator(&w.arena)));
  if (!http::parse_response_head(*w.response, bytes.substr(0, scan.head_size), false)) return false;
  if (stage == Stage::parse) {
    w.end_exchange();
    return true;
  }
  auto& res = w.response->get();
  bool upstream_keep_alive = w.response->keep_alive();
  auto idle = http::keep_alive_timeout(res[bhttp::field::keep_alive]);
  benchmark::DoNotOptimize(upstream_keep_alive);
  benchmark::DoNotOptimize(idle);
  http::rewrite_response(res, w.request_id);
  const auto plan = http::plan_response(*w.response, false, 11, true);
  w.head_out.clear();
  if (w.edge != nullptr) {
    const auto vars = edge_variables(w, nullptr);
    http::append_response_head(w.head_out, res, plan, 11, 1, &w.edge->response_rules, &vars);
  } else {
    http::append_response_head(w.head_out, res, plan, 11, 1);
  }
  benchmark::DoNotOptimize(w.head_out.data());
  w.end_exchange();
  return true;
}

void request_bench(benchmark::State& state, std::string_view bytes, Stage stage,
                   bool use_arena = true, const Router::Route* edge = nullptr) {
  Worker w;
  w.use_arena = use_arena;
  w.edge = edge;
  if (!run_request(w, bytes, stage)) {  // also warms the pool and head_out
    state.SkipWithError("request rejected");
    return;
  }
  AllocScope allocs(state);
  for (auto _ : state) benchmark::DoNotOptimize(run_request(w, bytes, stage));
  allocs.done();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

// One head through Run (a response of the seed path, or either side through the head index).
template <bool (*Run)(Worker&, std::string_view, Stage)>
void head_bench(benchmark::State& state, std::string_view bytes, Stage stage,
                const Router::Route* edge = nullptr) {
  Worker w;
  w.edge = edge;
  w.request_id = "0b5c6a1e-7d3f-4e2a-9c8b-1a2b3c4d5e6f";
  if (!Run(w, bytes, stage)) {
    state.SkipWithError("head rejected");
    return;
  }
  AllocScope allocs(state);
  for (auto _ : state) benchmark::DoNotOptimize(Run(w, bytes, stage));
  allocs.done();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

// Browser request: the whole sequence, then its prefixes (scan only; scan + parse + checks).
void BM_RequestBrowser(benchmark::State& s) { request_bench(s, browser_request, Stage::full); }
void BM_RequestBrowserScan(benchmark::State& s) { request_bench(s, browser_request, Stage::scan); }
void BM_RequestBrowserParse(benchmark::State& s) { request_bench(s, browser_request, Stage::parse); }
void BM_RequestWrk(benchmark::State& s) { request_bench(s, wrk_request, Stage::full); }
// The same as BM_RequestBrowser with the fields on the heap: what the arena saves, and a check
// that the allocation counter counts.
void BM_RequestBrowserNoArena(benchmark::State& s) {
  request_bench(s, browser_request, Stage::full, false);
}
BENCHMARK(BM_RequestBrowser);
BENCHMARK(BM_RequestBrowserScan);
BENCHMARK(BM_RequestBrowserParse);
BENCHMARK(BM_RequestWrk);
BENCHMARK(BM_RequestBrowserNoArena);
// With header rules on and a path rewrite: what the rules cost per request (allocs/op must stay 0).
void BM_RequestWithHeaderRules(benchmark::State& s) {
  const auto edge = edge_route();
  request_bench(s, browser_request, Stage::full, true, &edge);
}
BENCHMARK(BM_RequestWithHeaderRules);

void BM_ResponseSmall(benchmark::State& s) { head_bench<run_response>(s, small_response, Stage::full); }
void BM_ResponseSmallScan(benchmark::State& s) { head_bench<run_response>(s, small_response, Stage::scan); }
void BM_ResponseSmallParse(benchmark::State& s) { head_bench<run_response>(s, small_response, Stage::parse); }
void BM_ResponseApp(benchmark::State& s) { head_bench<run_response>(s, app_response, Stage::full); }
BENCHMARK(BM_ResponseSmall);
BENCHMARK(BM_ResponseSmallScan);
BENCHMARK(BM_ResponseSmallParse);
BENCHMARK(BM_ResponseApp);
void BM_ResponseWithHeaderRules(benchmark::State& s) {
  const auto edge = edge_route();
  head_bench<run_response>(s, app_response, Stage::full, &edge);
}
BENCHMARK(BM_ResponseWithHeaderRules);

// ---- the head index path (http/head_index.hpp, issue 17 point 3) ----------------------------
// The same steps over the index: one strict pass fills it (no Beast parser, no fields), the
// session's reads are lookups in it, and the head sent on is the received bytes with the edits
// spliced in. Stage::parse stops after the index (the counterpart of scan + Beast + checks).
http::Variables index_variables(const Worker& w, const http::RequestHead* req) {
  auto v = edge_variables(w, nullptr);
  if (req != nullptr) {
    v[http::Variable::host] = http::host_without_port(req->host());
    v[http::Variable::request_uri] = http::path_of(req->target());
  }
  return v;
}

[[gnu::noinline]] bool run_index_request(Worker& w, std::string_view bytes, Stage stage) {
  auto& req = w.request_index;
  const auto v = http::index_request_head(bytes, {w.max_header_bytes, w.max_uri_bytes, 0}, req);
  if (v.result != http::HeadScan::Result::complete) return false;
  if (stage != Stage::full) return true;
  {
    char generated[37];
    const auto id = http::choose_request_id(req, w.ids, generated);
    const auto n = std::min(id.size(), sizeof w.id_storage);
    std::memcpy(w.id_storage, id.data(), n);
    w.request_id = std::string_view(w.id_storage, n);
  }
  bool keep = req.keep_alive();
  benchmark::DoNotOptimize(keep);
  benchmark::DoNotOptimize(req.body_done());
  benchmark::DoNotOptimize(req.content_length());
  const auto* upstream = w.router.route(req.host(), http::path_of(req.target()));
  benchmark::DoNotOptimize(upstream);
  bool chunked = req.chunked();
  bool idempotent = http::is_idempotent(req.verb());
  benchmark::DoNotOptimize(chunked);
  benchmark::DoNotOptimize(idempotent);
  const bool upgrade = http::wants_upgrade(req, !req.body_done());
  const http::ForwardedFor info{w.client_ip, "http", w.request_id, upgrade};
  w.head_out.clear();
  if (w.edge != nullptr) {
    const auto vars = index_variables(w, &req);
    http::splice_request_head(w.head_out, req, {info, chunked, &*w.edge->rewrite, &w.edge->request_rules, &vars});
  } else {
    http::splice_request_head(w.head_out, req, {info, chunked});
  }
  benchmark::DoNotOptimize(w.head_out.data());
  return true;
}

[[gnu::noinline]] bool run_index_response(Worker& w, std::string_view bytes, Stage stage) {
  auto& res = w.response_index;
  const auto v = http::index_response_head(bytes, w.max_header_bytes, res);
  if (v.result != http::HeadScan::Result::complete) return false;
  if (stage != Stage::full) return true;
  bool upstream_keep_alive = res.keep_alive(false);
  auto idle = http::keep_alive_timeout(res.value(http::KnownField::keep_alive));
  benchmark::DoNotOptimize(upstream_keep_alive);
  benchmark::DoNotOptimize(idle);
  const auto plan = http::plan_response(res, false, 11, true);
  w.head_out.clear();
  if (w.edge != nullptr) {
    const auto vars = index_variables(w, nullptr);
    http::splice_response_head(w.head_out, res, {w.request_id, plan, 11, 1, http::ResponseSplice::Kind::final_head, &w.edge->response_rules, &vars});
  } else {
    http::splice_response_head(w.head_out, res, {w.request_id, plan, 11, 1});
  }
  benchmark::DoNotOptimize(w.head_out.data());
  return true;
}

void BM_IndexRequestBrowser(benchmark::State& s) { head_bench<run_index_request>(s, browser_request, Stage::full); }
void BM_IndexRequestBrowserParse(benchmark::State& s) {
  head_bench<run_index_request>(s, browser_request, Stage::parse);
}
void BM_IndexRequestWrk(benchmark::State& s) { head_bench<run_index_request>(s, wrk_request, Stage::full); }
void BM_IndexRequestWithHeaderRules(benchmark::State& s) {
  const auto edge = edge_route();
  head_bench<run_index_request>(s, browser_request, Stage::full, &edge);
}
void BM_IndexResponseSmall(benchmark::State& s) { head_bench<run_index_response>(s, small_response, Stage::full); }
void BM_IndexResponseSmallParse(benchmark::State& s) {
  head_bench<run_index_response>(s, small_response, Stage::parse);
}
void BM_IndexResponseApp(benchmark::State& s) { head_bench<run_index_response>(s, app_response, Stage::full); }
void BM_IndexResponseWithHeaderRules(benchmark::State& s) {
  const auto edge = edge_route();
  head_bench<run_index_response>(s, app_response, Stage::full, &edge);
}
BENCHMARK(BM_IndexRequestBrowser);
BENCHMARK(BM_IndexRequestBrowserParse);
BENCHMARK(BM_IndexRequestWrk);
BENCHMARK(BM_IndexRequestWithHeaderRules);
BENCHMARK(BM_IndexResponseSmall);
BENCHMARK(BM_IndexResponseSmallParse);
BENCHMARK(BM_IndexResponseApp);
BENCHMARK(BM_IndexResponseWithHeaderRules);

// Rewriting + serialising alone is BM_RequestBrowser − BM_RequestBrowserParse: isolating it
// would need PauseTiming around a fresh parse, which costs more than what it would measure.

// Per-request accounting: Session::log_exchange() with access logs off (the benchmark's
// config): the status-class counter, the duration histogram bucket and sum, with the clock read
// the session makes.
[[gnu::noinline]] void account(EndpointCounters& c, const Clock& clock, Clock::time_point start,
                               unsigned status) {
  EndpointCounters::bump(c.responses[status / 100]);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(clock.now() - start);
  const double seconds = static_cast<double>(us.count()) / 1e6;
  std::size_t b = 0;
  while (b < EndpointCounters::buckets && seconds > duration_bounds[b]) ++b;
  EndpointCounters::bump(c.duration_counts[b]);
  EndpointCounters::bump(c.duration_sum_us, static_cast<std::uint64_t>(us.count()));
}

void BM_MetricsIncrement(benchmark::State& state) {
  EndpointCounters counters;
  const Clock& clock = steady_clock();
  const auto start = clock.now();
  AllocScope allocs(state);
  for (auto _ : state) account(counters, clock, start, 200);
  allocs.done();
  benchmark::DoNotOptimize(counters.duration_sum_us.load());
}
BENCHMARK(BM_MetricsIncrement);

// The counter updates alone (no clock read): what the per-worker cache-line layout costs.
void BM_MetricsBumpOnly(benchmark::State& state) {
  EndpointCounters counters;
  AllocScope allocs(state);
  std::uint64_t us = 0;
  for (auto _ : state) {
    EndpointCounters::bump(counters.responses[2]);
    EndpointCounters::bump(counters.duration_counts[us & 7]);
    EndpointCounters::bump(counters.duration_sum_us, ++us);
  }
  allocs.done();
  benchmark::DoNotOptimize(counters.duration_sum_us.load());
}
BENCHMARK(BM_MetricsBumpOnly);

// The access log's per-request call (AccessLog::write: format the line, copy it into this
// thread's ring), to /dev/null, whose writer drains it on its timer or fill mark. `dropped`
// counts lines the writer did not drain in time (then the loop measures the drop path too).
void access_log_bench(benchmark::State& state, config::AccessLogFormat format) {
  config::LogSection section;
  section.access = format;
  section.access_file = "/dev/null";
  AccessLog log(section);
  AccessRecord r;
  r.client = "127.0.0.1";
  r.method = "GET";
  r.target = "/api/items?page=2";
  r.status = 200;
  r.upstream = "app";
  r.server = "127.0.0.1:9001";
  r.attempts = 1;
  r.bytes_out = 1024;
  r.duration = std::chrono::microseconds(412);
  r.request_id = "6f1c2a9e4b7d4e0c8a3f5d2b1e9c7a60";
  r.protocol = "HTTP/1.1";
  r.host = "shop.example.com";
  r.user_agent = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
  r.route = "*/api/";
  r.upstream_connect = std::chrono::microseconds(0);
  r.upstream_first_byte = std::chrono::microseconds(301);
  log.write(r);  // this thread's ring and line buffer: the one-time allocations
  AllocScope allocs(state);
  for (auto _ : state) log.write(r);
  allocs.done();
  log.flush();
  state.counters["dropped"] = static_cast<double>(log.dropped());
}
void BM_AccessLogText(benchmark::State& state) { access_log_bench(state, config::AccessLogFormat::text); }
void BM_AccessLogJson(benchmark::State& state) { access_log_bench(state, config::AccessLogFormat::json); }
BENCHMARK(BM_AccessLogText);
BENCHMARK(BM_AccessLogJson);

}  // namespace
