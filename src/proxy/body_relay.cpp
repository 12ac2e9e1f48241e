#include "sluice/proxy/body_relay.hpp"

namespace sluice::proxy {

namespace {
constexpr std::string_view crlf = "\r\n";
}

FramedPiece::FramedPiece(std::string_view head, std::string_view piece, bool chunked, bool last) noexcept
    : chunk_(piece.size()) {
  namespace net = boost::asio;
  if (!head.empty()) out_[count_++] = net::buffer(head.data(), head.size());
  if (chunked && !piece.empty()) out_[count_++] = net::buffer(chunk_.data, chunk_.size);
  if (!piece.empty()) out_[count_++] = net::buffer(piece.data(), piece.size());
  if (chunked && !piece.empty()) out_[count_++] = net::buffer(crlf.data(), crlf.size());
  if (chunked && last) out_[count_++] = net::buffer(http::last_chunk.data(), http::last_chunk.size());
}

}  // namespace sluice::proxy
