#pragma once
// The fuzz targets' bodies. Each takes one input and runs it through the same functions the
// proxy runs (http/strict, http/head, http/rewrite, Beast's parser, config/loader), then checks
// invariants; a broken invariant calls fail(), which aborts (libFuzzer keeps the input) or, in
// the unit tests' replay of fuzz/corpus and fuzz/regressions, throws.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sluice::fuzz {

struct InvariantBroken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// abort() by default; set to true to throw InvariantBroken instead.
void throw_on_failure(bool enable);
[[noreturn]] void fail(std::string_view what, std::string_view detail = {});
inline void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// (a) Raw bytes a client sent on one connection (pipelined requests): head scan, Beast, framing
// checks, rewrite, body relay; every request we would forward must re-parse, under the same
// strict rules, to the same request and end exactly where we think it ends.
void request_stream(const std::uint8_t* data, std::size_t size);

// (b) Byte 0 describes the request (bit 0: HEAD, bit 1: HTTP/1.0 client, bit 2: client wants
// keep-alive, bit 3: a retried request); the rest is what the origin sent. Interim and final
// heads and the relayed body must re-parse on the client's side to the same response.
void response_stream(const std::uint8_t* data, std::size_t size);

// (c) TOML text: a validated config or errors, each with FILE:LINE:COL; never a crash.
void config_text(const std::uint8_t* data, std::size_t size);

// (d) A chunked request body: decoded in one go and byte by byte (both must agree), re-chunked as
// the relay does, and the re-chunked body must decode to the same bytes and end at its end.
void chunked_body(const std::uint8_t* data, std::size_t size);

// (e) The head index against today's head path on the same bytes (fuzz/targets/head_index.cpp):
// a request head (the bytes a client sent), and a response head (byte 0 as in (b), then what the
// origin sent; bit 4 of byte 0: header rules on the final head). Same verdicts; on what both
// accept, the same fields and the same spliced head (with and without header rules).
void head_index_request(const std::uint8_t* data, std::size_t size);
void head_index_response(const std::uint8_t* data, std::size_t size);
// (f) Byte 0 picks the origin's answer (bits 0-1) and whether the client's frames arrive one
// at a time (bit 2); the rest is what an HTTP/2 client sent after its
// preface on one h2c connection, run through DownstreamSession and Http2Session over loopback
// sockets to a test origin. Every request that reached the origin must be one well-formed
// HTTP/1.1 request under sluice's strict rules (at most the last one unfinished), no more than
// the client opened streams, and every session must end, leaving no work, when the client goes.
void h2_client_bytes(const std::uint8_t* data, std::size_t size);

// A head's start line, then its field lines stably sorted by lower-cased name.
std::string canonical_head(std::string_view head);

}  // namespace sluice::fuzz
