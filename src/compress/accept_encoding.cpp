// Accept-Encoding (RFC 9110 §12.5.3):
//   Accept-Encoding = #( codings [ weight ] )
//   codings = content-coding / "identity" / "*"
//   weight  = OWS ";" OWS "q=" qvalue                      (§12.4.2)
//   qvalue  = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
// Parameters other than q are tolerated (token "=" token / quoted-string) and ignored.
#include "sluice/compress/accept_encoding.hpp"

#include <algorithm>

#include "ascii.hpp"
#include "sluice/http/head_index.hpp"

namespace sluice::compress {
namespace {

// A cursor over one field value.
struct AcceptCursor {
  std::string_view s;
  std::size_t at = 0;

  bool end() const noexcept { return at == s.size(); }
  char peek() const noexcept { return s[at]; }
  void skip_ows() noexcept {
    while (!end() && ascii::is_ows(peek())) ++at;
  }
  std::string_view token() noexcept {
    const auto from = at;
    while (!end() && ascii::is_tchar(peek())) ++at;
    return s.substr(from, at - from);
  }
  // RFC 9110 §5.6.4; false when it does not close or holds a control byte.
  bool quoted_string() noexcept {
    for (++at; !end(); ++at) {
      const auto u = static_cast<unsigned char>(peek());
      if (u == '"') {
        ++at;
        return true;
      }
      if (u == '\\')
        ++at;
      else if ((u < 0x20 && u != '\t') || u == 0x7F)
        return false;
      if (end()) return false;
    }
    return false;
  }
  // After a bad element: on to the next comma that is not inside a quoted string.
  void skip_element() noexcept {
    while (!end() && peek() != ',') {
      if (peek() == '"') {
        if (!quoted_string()) at = s.size();
      } else {
        ++at;
      }
    }
  }
};

// The qvalue grammar exactly, in thousandths; -1 when it is not one.
int parse_qvalue(std::string_view v) noexcept {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return -1;
  const bool one = v[0] == '1';
  if (v.size() == 1) return one ? 1000 : 0;
  if (v[1] != '.' || v.size() > 5) return -1;
  int thousandths = 0;
  int scale = 100;
  for (std::size_t i = 2; i < v.size(); ++i, scale /= 10) {
    if (v[i] < '0' || v[i] > '9') return -1;
    thousandths += (v[i] - '0') * scale;
  }
  if (one && thousandths != 0) return -1;
  return one ? 1000 : thousandths;
}

// The parameters after a coding: the weight (1000 without a q), or -1 when they do not parse.
int parse_accept_params(AcceptCursor& c) noexcept {
  int weight = 1000;
  for (c.skip_ows(); !c.end() && c.peek() == ';'; c.skip_ows()) {
    ++c.at;
    c.skip_ows();
    const auto name = c.token();
    if (name.empty() || c.end() || c.peek() != '=') return -1;
    ++c.at;
    if (!c.end() && c.peek() == '"') {
      if (!c.quoted_string() || ascii::iequals(name, "q")) return -1;  // q is never quoted
      continue;
    }
    const auto value = c.token();
    if (value.empty()) return -1;
    if (ascii::iequals(name, "q") && (weight = parse_qvalue(value)) < 0) return -1;
  }
  return weight;
}

// The slot of a coding sluice knows (identity 0, gzip 1, zstd 2, br 3, "*" 4), or -1.
int accept_slot(std::string_view coding) noexcept {
  if (ascii::iequals(coding, "gzip") || ascii::iequals(coding, "x-gzip")) return 1;
  if (ascii::iequals(coding, "zstd")) return 2;
  if (ascii::iequals(coding, "br")) return 3;
  if (ascii::iequals(coding, "identity")) return 0;
  if (coding == "*") return 4;
  return -1;
}

}  // namespace

void AcceptEncoding::note(std::size_t slot, Weight w) noexcept {
  auto& held = weights_[slot];
  held = held == unlisted ? w : std::min(held, w);
}

void AcceptEncoding::add(std::string_view value) noexcept {
  present_ = true;
  AcceptCursor c{value};
  while (!c.end()) {
    c.skip_ows();
    if (c.end()) break;
    if (c.peek() == ',') {  // empty list elements are allowed (RFC 9110 §5.6.1)
      ++c.at;
      continue;
    }
    const auto coding = c.token();
    const int weight = coding.empty() ? -1 : parse_accept_params(c);
    c.skip_ows();
    if (weight < 0 || (!c.end() && c.peek() != ',')) {
      c.skip_element();
      continue;
    }
    if (const int slot = accept_slot(coding); slot >= 0)
      note(static_cast<std::size_t>(slot), static_cast<Weight>(weight));
  }
}

AcceptEncoding::Weight AcceptEncoding::weight(Coding c) const noexcept {
  const auto own = listed(c);
  if (own != unlisted) return own;
  if (star() != unlisted) return star();
  return c == Coding::identity ? Weight{1000} : Weight{0};
}

AcceptEncoding accept_encoding_of(const http::RequestHead& req) noexcept {
  AcceptEncoding accept;
  for (const auto& f : req.fields()) {
    if (f.known == http::KnownField::unknown && ascii::iequals(req.name(f), "accept-encoding"))
      accept.add(req.value(f));
  }
  return accept;
}

Coding negotiate(const AcceptEncoding& accept, const Preference& offered) noexcept {
  Coding best = Coding::identity;
  AcceptEncoding::Weight best_weight = 0;
  for (const auto c : offered.order()) {
    // Strictly greater: on a tie the earlier (the server's preferred) coding stays.
    if (const auto w = accept.weight(c); w > best_weight) {
      best = c;
      best_weight = w;
    }
  }
  // identity wins only when the client lists it itself above the best coding; its implicit
  // acceptability ("unless excluded") is not a preference for it.
  if (best != Coding::identity && accept.listed(Coding::identity) > best_weight)
    return Coding::identity;
  return best;
}

}  // namespace sluice::compress
