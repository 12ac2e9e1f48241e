#pragma once
// Accept-Encoding (RFC 9110 §12.5.3) read into five weights, and the choice of a coding from
// them. No allocation: a request's Accept-Encoding lines are scanned once into this small value.
// Any thread; a value belongs to its request.
#include <array>
#include <cstdint>
#include <string_view>

#include "sluice/compress/coding.hpp"

namespace sluice::http {
class RequestHead;
}

namespace sluice::compress {

class AcceptEncoding {
public:
  // A weight in thousandths (RFC 9110 §12.4.2: qvalue, 0 to 1 with at most three decimals).
  using Weight = std::int16_t;
  static constexpr Weight unlisted = -1;

  // One field line's value; call once per Accept-Encoding line (RFC 9110 §5.3: the lines are one
  // list). An element that does not parse — a bad token, a qvalue outside the grammar ("q=2",
  // "q=0.1234", "q=x"), a stray byte — is ignored whole, as if the client had not sent it; the
  // rest of the line still counts. A coding listed twice keeps its lowest weight: a client that
  // refuses a coding anywhere is not sent it.
  void add(std::string_view value) noexcept;

  // Whether the request had an Accept-Encoding line at all. Without one, RFC 9110 lets a server
  // pick any coding, but clients that send none (scripts, health checks, old libraries) mostly
  // cannot decode one: as nginx and Envoy do, such a request is answered in identity.
  bool present() const noexcept { return present_; }
  // The weight the client gives `c`: its own entry, else "*"'s, else 0 — except identity, which
  // is acceptable (1000) unless refused by "identity;q=0" or by "*;q=0" without an identity entry.
  Weight weight(Coding c) const noexcept;
  // The weight of `c`'s own entry (or "*" for Coding::identity's slot when asked via star()).
  Weight listed(Coding c) const noexcept { return weights_[static_cast<std::size_t>(c)]; }
  Weight star() const noexcept { return weights_[star_slot]; }

private:
  static constexpr std::size_t star_slot = 4;
  void note(std::size_t slot, Weight w) noexcept;
  // identity, gzip (and x-gzip, RFC 9110 §8.4.1.3), zstd, br, "*"
  std::array<Weight, 5> weights_{unlisted, unlisted, unlisted, unlisted, unlisted};
  bool present_ = false;
};

// Every Accept-Encoding line of a request, in order.
AcceptEncoding accept_encoding_of(const http::RequestHead& req) noexcept;

// The coding to send: the one of `offered` with the client's highest weight, ties broken by
// `offered`'s order (the server's preference). identity when the client accepts none of them
// (weight 0, or no Accept-Encoding at all), or when the client lists identity itself with a
// higher weight than the best of them. A client that refuses identity and every offered coding
// ("identity;q=0" alone) is still answered in identity: RFC 9110 §12.5.3 allows that instead of
// a 406, and it is what nginx and Envoy do (the origin's answer reaches the client unchanged).
Coding negotiate(const AcceptEncoding& accept, const Preference& offered) noexcept;

}  // namespace sluice::compress
