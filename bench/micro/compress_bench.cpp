// Response compression's CPU per KiB (compress/encoder.hpp): one response body encoded the way
// the relay is to drive an Encoder — 16 KiB pieces, a flush after each (what the origin sent is
// never held back), finish — per coding and level, on a generated JSON API answer and an HTML
// page (fixed seeds). Counters: ratio (body / coded bytes), cpu_per_KiB (CPU seconds per KiB
// of body), allocs (blocks the library took from malloc per response: 0 once the pool is warm),
// cached_allocs (blocks it took from the pool's cache instead). SLUICE_COMPRESS_FILE=PATH adds
// every level on that file's bytes.
// Results: bench/results/compression.md.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "sluice/compress/encoder.hpp"

namespace {

using namespace sluice::compress;

constexpr std::array<std::string_view, 48> vocabulary = {
    "the",      "of",      "and",   "service",  "request", "response", "server",   "cluster",
    "region",   "account", "order", "payment",  "status",  "pending",  "shipped",  "delivered",
    "customer", "product", "price", "currency", "review",  "rating",   "article",  "comment",
    "latency",  "timeout", "retry", "healthy",  "weight",  "draining", "upstream", "session",
    "a",        "to",      "in",    "for",      "with",    "on",       "new",      "update",
    "europe",   "america", "asia",  "storage",  "network", "compute",  "billing",  "support"};

// Word i with probability ~ 1/(i+1) (Zipf-like, as text is).
std::string_view pick_word(std::mt19937& rng) {
  static const std::discrete_distribution<std::size_t> zipf = [] {
    std::vector<double> w;
    for (std::size_t i = 0; i < vocabulary.size(); ++i)
      w.push_back(1.0 / static_cast<double>(i + 1));
    return std::discrete_distribution<std::size_t>(w.begin(), w.end());
  }();
  auto d = zipf;
  return vocabulary[d(rng)];
}

std::string hex_id(std::mt19937& rng, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s += hex[rng() % 16];
  return s;
}

std::string sentence(std::mt19937& rng, int words) {
  std::string s;
  for (int i = 0; i < words; ++i) s.append(i ? " " : "").append(pick_word(rng));
  return s;
}

// An API's list answer: objects with ids, uuids, timestamps, numbers, enums and free text.
std::string json_body(std::size_t n) {
  std::mt19937 rng(42);
  std::string s = "{\"items\":[";
  for (int i = 0; s.size() < n; ++i) {
    s += "{\"id\":" + std::to_string(100000 + i * 7 + rng() % 7) + ",\"uuid\":\"" + hex_id(rng, 8) +
         "-" + hex_id(rng, 4) + "-" + hex_id(rng, 4) + "-" + hex_id(rng, 12) +
         "\",\"created_at\":\"2026-" + std::to_string(10 + rng() % 3) + "-" +
         std::to_string(10 + rng() % 18) + "T" + std::to_string(10 + rng() % 14) + ":" +
         std::to_string(10 + rng() % 50) + ":" + std::to_string(10 + rng() % 50) +
         "Z\",\"status\":\"" + std::string(vocabulary[12 + rng() % 4]) +
         "\",\"amount\":" + std::to_string(rng() % 100000 / 100.0) + ",\"customer\":{\"name\":\"" +
         sentence(rng, 2) + "\",\"region\":\"" + std::string(vocabulary[40 + rng() % 3]) +
         "\"},\"note\":\"" + sentence(rng, 4 + static_cast<int>(rng() % 12)) + "\"},";
  }
  s.resize(n - 2);
  return s + "]}";
}

// A page: a head with styles, then articles of paragraphs and links.
std::string html_body(std::size_t n) {
  std::mt19937 rng(43);
  std::string s =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>News</title>"
      "<link rel=\"stylesheet\" href=\"/static/site.css\"></head><body><nav class=\"top\">";
  for (int i = 0; i < 8; ++i)
    s += "<a href=\"/" + std::string(pick_word(rng)) + "\">" + sentence(rng, 1) + "</a>";
  s += "</nav><main>";
  while (s.size() < n) {
    s += "<article class=\"story\" id=\"s" + hex_id(rng, 6) + "\"><h2><a href=\"/story/" +
         hex_id(rng, 10) + "\">" + sentence(rng, 6) + "</a></h2><p class=\"meta\">by " +
         sentence(rng, 2) + "</p><p>" + sentence(rng, 30 + static_cast<int>(rng() % 40)) +
         ".</p></article>\n";
  }
  s.resize(n);
  return s;
}

// A real file as the body, when SLUICE_COMPRESS_FILE names one (the generated text has a small
// vocabulary and no English: brotli's built-in dictionary shows only on real text).
std::string file_body() {
  const char* path = std::getenv("SLUICE_COMPRESS_FILE");
  if (path == nullptr) return {};
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 0: JSON, 1: HTML (64 KiB each), 2: a small JSON answer (2 KiB: the per-response costs show),
// 3: SLUICE_COMPRESS_FILE.
const std::string& corpus(int which) {
  static const std::string json = json_body(64 * 1024);
  static const std::string html = html_body(64 * 1024);
  static const std::string small = json_body(2 * 1024);
  static const std::string file = file_body();
  return which == 0 ? json : which == 1 ? html : which == 2 ? small : file;
}

// One response through one encoder; returns the coded size.
std::size_t encode_response(EncoderPool& pool, Coding c, int level, std::string_view body,
                            std::span<char> out, std::size_t piece) {
  auto enc = pool.acquire(c, level, body.size());
  if (!enc) return 0;
  std::size_t coded = 0;
  const auto drain = [&](auto call) {
    for (;;) {
      auto step = call();
      if (!step) return;
      coded += step->produced;
      if (step->done) return;
    }
  };
  while (!body.empty()) {
    auto rest = body.substr(0, piece);
    body.remove_prefix(rest.size());
    while (!rest.empty()) {
      auto step = enc->feed(rest, out);
      if (!step) return 0;
      coded += step->produced;
      rest.remove_prefix(step->consumed);
    }
    drain([&] { return enc->flush(out); });
  }
  drain([&] { return enc->finish(out); });
  return coded;
}

// args: coding, level, corpus (0 JSON, 1 HTML), piece size
void BM_Compress(benchmark::State& state) {
  const auto c = static_cast<Coding>(state.range(0));
  const auto level = static_cast<int>(state.range(1));
  const auto& body = corpus(static_cast<int>(state.range(2)));
  const auto piece = static_cast<std::size_t>(state.range(3));
  EncoderPool pool;
  std::vector<char> out(16 * 1024);
  std::size_t coded = encode_response(pool, c, level, body, out, piece);  // warm the pool
  const auto allocs_before = pool.stats().system_allocs;
  const auto hits_before = pool.stats().cache_hits;
  for (auto _ : state) {
    coded = encode_response(pool, c, level, body, out, piece);
    benchmark::DoNotOptimize(coded);
  }
  const auto kib = static_cast<double>(body.size()) / 1024.0;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  static constexpr std::string_view names[] = {" json", " html", " json-2k", " file"};
  state.SetLabel(std::string(token(c)) + "-" + std::to_string(level) +
                 std::string(names[state.range(2)]));
  state.counters["ratio"] = static_cast<double>(body.size()) / static_cast<double>(coded);
  // CPU seconds per KiB of body (printed with a unit prefix: "2.4u" is 2.4 us).
  state.counters["cpu_per_KiB"] = benchmark::Counter(
      kib, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["allocs"] = static_cast<double>(pool.stats().system_allocs - allocs_before) /
                             static_cast<double>(state.iterations());
  state.counters["cached_allocs"] = static_cast<double>(pool.stats().cache_hits - hits_before) /
                                    static_cast<double>(state.iterations());
}

void compress_args(benchmark::internal::Benchmark* b) {
  const std::pair<Coding, std::vector<int>> levels[] = {
      {Coding::gzip, {1, 4, 5, 6}}, {Coding::zstd, {1, 3, 5}}, {Coding::br, {3, 4, 5}}};
  for (const auto& [c, ls] : levels)
    for (const int level : ls)
      for (const int which : {0, 1}) b->Args({static_cast<int>(c), level, which, 16 * 1024});
  // The defaults without a flush per piece (one 64 KiB piece): what the flushes cost.
  const Levels defaults;
  for (const auto c : {Coding::gzip, Coding::zstd, Coding::br})
    for (const int which : {0, 1}) b->Args({static_cast<int>(c), defaults.of(c), which, 64 * 1024});
  for (const auto c : {Coding::gzip, Coding::zstd, Coding::br})
    b->Args({static_cast<int>(c), defaults.of(c), 2, 16 * 1024});
  if (std::getenv("SLUICE_COMPRESS_FILE") != nullptr) {
    for (const auto& [c, ls] : levels)
      for (const int level : ls) b->Args({static_cast<int>(c), level, 3, 16 * 1024});
  }
}
BENCHMARK(BM_Compress)->Apply(compress_args);

}  // namespace
