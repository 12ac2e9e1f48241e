#include "sluice/proxy/proxy_protocol.hpp"

#include <string>

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using State = ProxyHeaderParser::State;

// Feeds `bytes` in pieces of `step` bytes; returns how many the parser took in all.
std::size_t feed(ProxyHeaderParser& p, std::string_view bytes, std::size_t step) {
  std::size_t taken = 0;
  while (taken < bytes.size() && p.state() == State::need_more) {
    const auto piece = bytes.substr(taken, step);
    const auto n = p.feed({piece.data(), piece.size()});
    taken += n;
    if (n < piece.size()) break;  // the header ended (or broke) inside this piece
  }
  return taken;
}

std::string v2(unsigned char ver_cmd, unsigned char fam, std::string body) {
  std::string h("\r\n\r\n\0\r\nQUIT\n", 12);
  h += static_cast<char>(ver_cmd);
  h += static_cast<char>(fam);
  h += static_cast<char>(body.size() >> 8);
  h += static_cast<char>(body.size() & 0xff);
  return h + body;
}

std::string v4_block() {  // 192.0.2.7:51000 -> 10.0.0.1:443
  return std::string("\xc0\x00\x02\x07\x0a\x00\x00\x01\xc7\x38\x01\xbb", 12);
}

TEST(ProxyProtocol, V1Tcp4InEveryFragmentationStopsAtTheHeaderEnd) {
  const std::string header = "PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n";
  const std::string after = "GET / HTTP/1.1\r\n";
  for (std::size_t step = 1; step <= header.size() + after.size(); ++step) {
    ProxyHeaderParser p;
    EXPECT_EQ(feed(p, header + after, step), header.size()) << step;
    ASSERT_EQ(p.state(), State::done) << step;
    EXPECT_EQ(p.version(), 1u);
    EXPECT_EQ(p.source()->to_string(), "192.0.2.7");
    EXPECT_EQ(p.source_port(), 51000);
  }
}

TEST(ProxyProtocol, V1Tcp6AndUnknown) {
  ProxyHeaderParser p;
  const std::string six = "PROXY TCP6 2001:db8::7 2001:db8::1 1 65535\r\n";
  EXPECT_EQ(feed(p, six, 64), six.size());
  ASSERT_EQ(p.state(), State::done);
  EXPECT_EQ(p.source()->to_string(), "2001:db8::7");

  // §2.1: UNKNOWN may carry anything up to CRLF; the connection's own addresses stand.
  for (const std::string unknown : {"PROXY UNKNOWN\r\n", "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"}) {
    ProxyHeaderParser u;
    EXPECT_EQ(feed(u, unknown + "GET", 3), unknown.size());
    EXPECT_EQ(u.state(), State::done) << unknown;
    EXPECT_FALSE(u.source().has_value());
  }
}

TEST(ProxyProtocol, V1MalformedFormsAreInvalid) {
  for (const std::string bad : {
           "GET / HTTP/1.1\r\n",                                      // no header at all
           "PROXY\r\n",                                               // no protocol
           "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",                      // unknown protocol
           "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",                        // a port missing
           "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",                    // a word too many
           "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",                     // two spaces
           "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",                    // not an address
           "PROXY TCP4 2001:db8::1 5.6.7.8 1 2\r\n",                  // family mismatch
           "PROXY TCP6 1.2.3.4 2001:db8::1 1 2\r\n",                  // family mismatch
           "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",                  // port out of range
           "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",                     // leading zero
           "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",                     // sign
           "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",                        // LF without CR
           "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX\r\n",                   // CR without LF
           "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",                      // case matters
       }) {
    for (std::size_t step : {1u, 7u, 200u}) {
      ProxyHeaderParser p;
      feed(p, bad, step);
      EXPECT_EQ(p.state(), State::invalid) << bad << " step " << step;
      EXPECT_FALSE(p.error().empty());
    }
  }
}

TEST(ProxyProtocol, V1LineIsBoundedAt107Bytes) {
  // The longest valid line is exactly 107 bytes.
  const std::string longest = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
  ASSERT_EQ(longest.size(), 104u);
  ProxyHeaderParser ok;
  EXPECT_EQ(feed(ok, longest, 1), longest.size());
  EXPECT_EQ(ok.state(), State::done);
  ProxyHeaderParser p;
  const std::string endless = "PROXY UNKNOWN " + std::string(200, 'x');
  EXPECT_LE(feed(p, endless, 16), ProxyHeaderParser::max_v1_length + 1);
  EXPECT_EQ(p.state(), State::invalid);
  ProxyHeaderParser at_limit;  // 107 bytes with its CRLF: accepted
  const std::string limit = "PROXY UNKNOWN " + std::string(107 - 16, 'x') + "\r\n";
  ASSERT_EQ(limit.size(), 107u);
  feed(at_limit, limit, 5);
  EXPECT_EQ(at_limit.state(), State::done);
  ProxyHeaderParser over;  // 108: refused
  feed(over, "PROXY UNKNOWN " + std::string(108 - 16, 'x') + "\r\n", 5);
  EXPECT_EQ(over.state(), State::invalid);
}

TEST(ProxyProtocol, V2ProxyInetWithTlvsSkippedInEveryFragmentation) {
  const std::string tlvs("\x04\x00\x03" "abc" "\x05\x00\x00", 9);  // NOOP-like TLVs, skipped
  const std::string header = v2(0x21, 0x11, v4_block() + tlvs);
  const std::string after = "\x16\x03\x01";  // a TLS ClientHello's first bytes stay unread
  for (std::size_t step = 1; step <= header.size() + after.size(); ++step) {
    ProxyHeaderParser p;
    EXPECT_EQ(feed(p, header + after, step), header.size()) << step;
    ASSERT_EQ(p.state(), State::done) << step;
    EXPECT_EQ(p.version(), 2u);
    EXPECT_EQ(p.source()->to_string(), "192.0.2.7");
    EXPECT_EQ(p.source_port(), 51000);
  }
}

TEST(ProxyProtocol, V2Inet6LocalUnspecAndUnix) {
  std::string six(36, '\0');
  six[0] = '\x20';
  six[1] = '\x01';
  six[2] = '\x0d';
  six[3] = '\xb8';
  six[15] = '\x07';
  six[32] = '\x01';
  six[33] = '\x02';
  ProxyHeaderParser p;
  const auto h6 = v2(0x21, 0x21, six);
  EXPECT_EQ(feed(p, h6, 5), h6.size());
  ASSERT_EQ(p.state(), State::done);
  EXPECT_EQ(p.source()->to_string(), "2001:db8::7");
  EXPECT_EQ(p.source_port(), 258);

  // LOCAL (the balancer's own check), UNSPEC and UNIX: valid, the real addresses stand.
  for (const auto& h : {v2(0x20, 0x00, ""), v2(0x20, 0x11, v4_block()), v2(0x21, 0x00, "xyz"),
                        v2(0x21, 0x31, std::string(216, 'u'))}) {
    ProxyHeaderParser q;
    EXPECT_EQ(feed(q, h + "GET", 4), h.size());
    EXPECT_EQ(q.state(), State::done);
    EXPECT_FALSE(q.source().has_value());
  }
}

TEST(ProxyProtocol, V2MalformedFormsAreInvalid) {
  std::string bad_sig = v2(0x21, 0x11, v4_block());
  bad_sig[5] = 'X';
  std::string too_long = v2(0x21, 0x11, v4_block());
  too_long[14] = '\x10';  // length 4108: more than max_v2_length
  too_long[15] = '\x0c';
  for (const auto& h : {
           bad_sig,
           v2(0x11, 0x11, v4_block()),                 // version 1 in a v2 header
           v2(0x22, 0x11, v4_block()),                 // command 2
           v2(0x21, 0x41, v4_block()),                 // family 4
           v2(0x21, 0x13, v4_block()),                 // transport 3
           v2(0x21, 0x12, v4_block()),                 // DGRAM
           v2(0x21, 0x11, v4_block().substr(0, 11)),   // address block cut short
           v2(0x21, 0x21, std::string(35, '\0')),      // IPv6 block cut short
           too_long,
       }) {
    for (std::size_t step : {1u, 16u, 300u}) {
      ProxyHeaderParser p;
      feed(p, h, step);
      EXPECT_EQ(p.state(), State::invalid) << "step " << step;
    }
  }
}

TEST(ProxyProtocol, IncompleteHeaderNeedsMore) {
  const std::string header = v2(0x21, 0x11, v4_block());
  ProxyHeaderParser p;
  EXPECT_EQ(feed(p, header.substr(0, header.size() - 1), 4), header.size() - 1);
  EXPECT_EQ(p.state(), State::need_more);
  ProxyHeaderParser q;
  feed(q, "PROXY TCP4 1.2.3.4", 3);
  EXPECT_EQ(q.state(), State::need_more);
  ProxyHeaderParser r;  // nothing fed yet
  EXPECT_EQ(r.state(), State::need_more);
  EXPECT_EQ(r.feed({}), 0u);
}

}  // namespace
}  // namespace sluice::proxy
