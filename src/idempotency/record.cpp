#include "sluice/idempotency/record.hpp"

#include <cstring>

namespace sluice::idempotency {

namespace {

constexpr std::size_t fp_size = std::tuple_size_v<Digest>;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(std::string_view in) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(in[i]);
  return v;
}

std::string begin(State state, const Digest& fp, std::size_t more) {
  std::string out;
  out.reserve(1 + fp_size + more);
  out.push_back(static_cast<char>(state));
  out.append(reinterpret_cast<const char*>(fp.data()), fp.size());
  return out;
}

}  // namespace

std::string encode_pending(const Digest& fp, std::string_view token) {
  auto out = begin(State::pending, fp, token.size());
  out.append(token);
  return out;
}

std::string encode_stored(const Digest& fp, unsigned status, std::string_view fields,
                          std::string_view body) {
  auto out = begin(State::stored, fp, 8 + fields.size() + body.size());
  put_u32(out, status);
  put_u32(out, static_cast<std::uint32_t>(fields.size()));
  out.append(fields);
  out.append(body);
  return out;
}

std::string encode_not_stored(const Digest& fp, unsigned status) {
  auto out = begin(State::not_stored, fp, 4);
  put_u32(out, status);
  return out;
}

std::optional<Entry> decode(std::string_view value) {
  if (value.size() < 1 + fp_size) return std::nullopt;
  Entry e;
  e.state = static_cast<State>(value[0]);
  std::memcpy(e.fingerprint.data(), value.data() + 1, fp_size);
  auto rest = value.substr(1 + fp_size);
  switch (e.state) {
    case State::pending: e.token = rest; return e;
    case State::not_stored:
      if (rest.size() != 4) return std::nullopt;
      e.status = get_u32(rest);
      return e;
    case State::stored: {
      if (rest.size() < 8) return std::nullopt;
      e.status = get_u32(rest);
      const auto fields = get_u32(rest.substr(4));
      rest = rest.substr(8);
      if (fields > rest.size()) return std::nullopt;
      e.fields = rest.substr(0, fields);
      e.body = rest.substr(fields);
      return e;
    }
  }
  return std::nullopt;
}

}  // namespace sluice::idempotency
