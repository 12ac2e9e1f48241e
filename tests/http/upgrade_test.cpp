// Upgrade rules (RFC 9110 §7.8): which requests are forwarded with their Upgrade, how the request
// and the 101 answer are rewritten, and which 101 answers are acceptable.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracle/beast_fields.hpp"
#include "sluice/http/rewrite.hpp"

namespace {

using sluice::http::Fields;
using Lines = std::vector<std::pair<std::string, std::string>>;

Fields fields_of(const Lines& lines) {
  Fields fields;
  for (const auto& [name, value] : lines) fields.insert(name, value);
  return fields;
}

Lines lines_of(const Fields& fields) {
  Lines out;
  for (const auto& line : fields) out.emplace_back(line.name_string(), line.value());
  return out;
}

const Lines k_websocket{{"Host", "a"},
                        {"Connection", "Upgrade"},
                        {"Upgrade", "websocket"},
                        {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                        {"Sec-WebSocket-Version", "13"}};

bool wants(const Lines& lines, unsigned version = 11, bool is_get = true, bool has_body = false) {
  return sluice::http::wants_upgrade(fields_of(lines), version, is_get, has_body);
}

// ---- which requests ---------------------------------------------------------------------------

TEST(Upgrade, AWebSocketHandshakeIsAnUpgrade) {
  EXPECT_TRUE(wants(k_websocket));
  // Option and protocol names are case-insensitive; the option may be one of several, on any
  // Connection line.
  EXPECT_TRUE(wants({{"Connection", "keep-alive, UPGRADE"}, {"Upgrade", "WebSocket"}}));
  EXPECT_TRUE(wants({{"Connection", "keep-alive"}, {"connection", "upgrade"}, {"Upgrade", "websocket"}}));
}

TEST(Upgrade, BothTheOptionAndTheFieldAreNeeded) {
  EXPECT_FALSE(wants({{"Upgrade", "websocket"}}));                         // no Connection option
  EXPECT_FALSE(wants({{"Connection", "upgrade"}}));                        // no Upgrade field
  EXPECT_FALSE(wants({{"Connection", "upgrade"}, {"Upgrade", " , "}}));     // an empty list
  EXPECT_FALSE(wants({{"Connection", "upgraded"}, {"Upgrade", "websocket"}}));
}

TEST(Upgrade, OnlyAnHttp11GetWithoutBody) {
  EXPECT_FALSE(wants(k_websocket, 10));                // RFC 9110 §7.8: ignored in HTTP/1.0
  EXPECT_FALSE(wants(k_websocket, 11, false));         // POST, PUT, ... are ordinary requests
  EXPECT_FALSE(wants(k_websocket, 11, true, true));    // a body would precede the switch
}

TEST(Upgrade, H2cIsNeverAnUpgrade) {
  EXPECT_FALSE(wants({{"Connection", "Upgrade, HTTP2-Settings"}, {"Upgrade", "h2c"}, {"HTTP2-Settings", "AAMAAABkAAQAAP__"}}));
  EXPECT_FALSE(wants({{"Connection", "upgrade"}, {"Upgrade", "H2C"}}));
  EXPECT_FALSE(wants({{"Connection", "upgrade"}, {"Upgrade", "h2c/1.0, h2c"}}));
  // Another protocol offered alongside h2c still is one.
  EXPECT_TRUE(wants({{"Connection", "upgrade"}, {"Upgrade", "h2c, websocket"}}));
  EXPECT_TRUE(sluice::http::is_h2c("h2c"));
  EXPECT_TRUE(sluice::http::is_h2c("H2C/1"));
  EXPECT_FALSE(sluice::http::is_h2c("h2"));
  EXPECT_FALSE(sluice::http::is_h2c("h2cx"));
}

// ---- request rewrite --------------------------------------------------------------------------

TEST(UpgradeRequest, KeepsUpgradeAndTheUpgradeOption) {
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "keep-alive, Upgrade, X-Private"},
                           {"X-Private", "1"},
                           {"Keep-Alive", "timeout=5"},
                           {"Upgrade", "websocket"},
                           {"Sec-WebSocket-Key", "k"}});
  sluice::http::rewrite_request(fields, {"192.0.2.1", "http", "id", true});
  EXPECT_EQ(fields["Upgrade"], "websocket");
  EXPECT_EQ(fields.count("Connection"), 1u);
  EXPECT_EQ(fields["Connection"], "upgrade");  // only the option the origin needs
  EXPECT_EQ(fields.count("X-Private"), 0u);    // other hop-by-hop fields still go
  EXPECT_EQ(fields.count("Keep-Alive"), 0u);
  EXPECT_EQ(fields["Sec-WebSocket-Key"], "k");  // end-to-end
}

TEST(UpgradeRequest, H2cAndHttp2SettingsAreStripped) {
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "Upgrade, HTTP2-Settings"},
                           {"Upgrade", "h2c, websocket"},
                           {"upgrade", "H2C"},
                           {"HTTP2-Settings", "AAMAAABkAAQAAP__"}});
  sluice::http::rewrite_request(fields, {"192.0.2.1", "http", "id", true});
  EXPECT_EQ(fields.count("Upgrade"), 1u);
  EXPECT_EQ(fields["Upgrade"], "websocket");
  EXPECT_EQ(fields.count("HTTP2-Settings"), 0u);
}

TEST(UpgradeRequest, WithoutUpgradeEverythingGoes) {
  // An h2c upgrade request (wants_upgrade() is false) is forwarded as a plain request.
  auto fields = fields_of({{"Host", "a"},
                           {"Connection", "Upgrade, HTTP2-Settings"},
                           {"Upgrade", "h2c"},
                           {"HTTP2-Settings", "AAMAAABkAAQAAP__"}});
  sluice::http::rewrite_request(fields, {"192.0.2.1", "http", "id"});
  EXPECT_EQ(fields.count("Upgrade"), 0u);
  EXPECT_EQ(fields.count("Connection"), 0u);
  EXPECT_EQ(fields.count("HTTP2-Settings"), 0u);
  // HTTP2-Settings goes even when Connection does not name it.
  auto bare = fields_of({{"Host", "a"}, {"HTTP2-Settings", "x"}});
  sluice::http::strip_hop_by_hop(bare);
  EXPECT_EQ(lines_of(bare), (Lines{{"Host", "a"}}));
}

// ---- 101 answers ------------------------------------------------------------------------------

TEST(UpgradeResponse, ASwitchMustNameAnOfferedProtocol) {
  const auto request = fields_of({{"Upgrade", "websocket, foo/2"}});
  EXPECT_TRUE(sluice::http::valid_switch(fields_of({{"Upgrade", "websocket"}}), request));
  EXPECT_TRUE(sluice::http::valid_switch(fields_of({{"Upgrade", "WebSocket"}}), request));
  EXPECT_TRUE(sluice::http::valid_switch(fields_of({{"Upgrade", "foo/2"}}), request));
  EXPECT_FALSE(sluice::http::valid_switch(fields_of({}), request));  // no Upgrade at all
  EXPECT_FALSE(sluice::http::valid_switch(fields_of({{"Upgrade", ""}}), request));
  EXPECT_FALSE(sluice::http::valid_switch(fields_of({{"Upgrade", "h2c"}}), request));
  EXPECT_FALSE(sluice::http::valid_switch(fields_of({{"Upgrade", "foo/3"}}), request));
  EXPECT_FALSE(sluice::http::valid_switch(fields_of({{"Upgrade", "websocket, h2c"}}), request));
}

TEST(UpgradeResponse, TheSwitchKeepsUpgradeTowardTheClient) {
  auto fields = fields_of({{"Upgrade", "websocket"},
                           {"Connection", "Upgrade, X-Internal"},
                           {"X-Internal", "1"},
                           {"Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}});
  sluice::http::rewrite_response(fields, "id", true);
  EXPECT_EQ(fields["Upgrade"], "websocket");
  EXPECT_EQ(fields["Connection"], "upgrade");
  EXPECT_EQ(fields.count("X-Internal"), 0u);
  EXPECT_EQ(fields["Sec-WebSocket-Accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(fields["X-Request-Id"], "id");
  // Any other answer loses them, as before.
  auto plain = fields_of({{"Upgrade", "websocket"}, {"Connection", "upgrade"}});
  sluice::http::rewrite_response(plain, "id");
  EXPECT_EQ(lines_of(plain), (Lines{{"X-Request-Id", "id"}}));
}

}  // namespace
