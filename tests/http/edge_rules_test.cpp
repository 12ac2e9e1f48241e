// Header rules, path rewrites and fixed answers in their compiled form (docs/edge.md), applied by
// the head serialisation the session uses (http/head.hpp).
#include "sluice/http/edge_rules.hpp"

#include <string>

#include <gtest/gtest.h>

#include "oracle/beast_head.hpp"
#include "sluice/http/head.hpp"

namespace {

namespace http = sluice::http;
using http::Variable;
using Pairs = std::vector<std::pair<std::string, std::string>>;
using Names = std::vector<std::string>;

http::Variables sample_variables() {
  http::Variables v;
  v[Variable::request_id] = "id-1";
  v[Variable::host] = "example.com";
  v[Variable::client_ip] = "192.0.2.7";
  v[Variable::upstream] = "app";
  v[Variable::server] = "app-1";
  v[Variable::config_version] = "3";
  v[Variable::request_uri] = "/a?b=1";
  v[Variable::client_cert_subject] = "CN=alice";
  v[Variable::client_cert_san] = "alice.test";
  v[Variable::client_cert_fingerprint] = "ab12";
  v[Variable::client_cert_verify] = "SUCCESS";
  return v;
}

std::string expand(std::string_view text, http::TemplateText kind = http::TemplateText::field_value) {
  std::string why;
  const auto t = http::Template::parse(text, kind, &why);
  EXPECT_TRUE(t) << why;
  if (!t) return {};
  std::string out;
  t->append(out, sample_variables());
  EXPECT_EQ(out.size(), t->size(sample_variables()));
  return out;
}

std::string refusal(std::string_view text, http::TemplateText kind = http::TemplateText::field_value) {
  std::string why;
  EXPECT_FALSE(http::Template::parse(text, kind, &why)) << text;
  return why;
}

TEST(EdgeTemplate, EveryVariableExpands) {
  EXPECT_EQ(expand("$request_id $host $client_ip $upstream $server $config_version $request_uri"),
            "id-1 example.com 192.0.2.7 app app-1 3 /a?b=1");
  EXPECT_EQ(expand("$client_cert_subject|$client_cert_san|$client_cert_fingerprint|$client_cert_verify"),
            "CN=alice|alice.test|ab12|SUCCESS");
}

TEST(EdgeTemplate, BracesDollarEscapeAndAdjacentVariables) {
  EXPECT_EQ(expand("https://$host$request_uri", http::TemplateText::uri), "https://example.com/a?b=1");
  EXPECT_EQ(expand("${upstream}_x"), "app_x");
  EXPECT_EQ(expand("costs $$5"), "costs $5");
  EXPECT_EQ(expand("plain"), "plain");
  EXPECT_EQ(expand(""), "");
}

TEST(EdgeTemplate, RefusesUnknownVariablesAndBadBytes) {
  EXPECT_NE(refusal("$hostname").find("unknown variable '$hostname'"), std::string::npos);
  EXPECT_NE(refusal("${host").find("unterminated"), std::string::npos);
  EXPECT_NE(refusal("a\r\nX-Injected: 1").find("byte 0x0d"), std::string::npos);
  EXPECT_NE(refusal(" leading").find("may not start or end"), std::string::npos);
  EXPECT_NE(refusal("https://a b/", http::TemplateText::uri).find("in a URI"), std::string::npos);
  EXPECT_EQ(expand("line\none\n", http::TemplateText::body), "line\none\n");  // a body is free text
}

TEST(EdgeNames, FramingAndHopByHopFieldsAreReserved) {
  for (const auto* name : {"Content-Length", "transfer-encoding", "Connection", "Host", "Keep-Alive",
                           "TE", "Trailer", "Upgrade", "Proxy-Connection", "Content_Length",
                           "Sluice-Error"})
    EXPECT_TRUE(http::reserved_header(name)) << name;
  EXPECT_FALSE(http::reserved_header("X-Env"));
  EXPECT_FALSE(http::reserved_header("Server"));
  EXPECT_TRUE(http::is_token("X-Served-By"));
  EXPECT_FALSE(http::is_token("X Env"));
  EXPECT_FALSE(http::is_token(""));
}

// The flat form gives what applying the blocks one after the other would: the upstream's, then
// the route's, each as remove, set, add.
TEST(EdgeHeaderRules, BlocksComposeInOrder) {
  http::HeaderRules rules;
  rules.apply(Names{"X-Debug"}, Pairs{{"X-Env", "prod"}}, Pairs{{"Via", "1.1 sluice"}, {"X-Tag", "u"}});
  rules.apply(Names{"x-tag"}, Pairs{{"x-env", "staging-$upstream"}}, Pairs{{"X-Tag", "r"}});
  EXPECT_TRUE(rules.drops("X-DEBUG"));
  EXPECT_TRUE(rules.drops("x-env"));
  EXPECT_TRUE(rules.drops("X-Tag"));
  EXPECT_FALSE(rules.drops("Via"));  // add keeps what is there
  std::string out;
  rules.append(out, sample_variables());
  EXPECT_EQ(out, "Via: 1.1 sluice\r\nx-env: staging-app\r\nX-Tag: r\r\n");
}

TEST(EdgeHeaderRules, ALineThatExpandsToNothingIsLeftOut) {
  http::HeaderRules rules;
  rules.apply({}, Pairs{{"X-Served-By", "$server"}}, {});
  std::string out;
  rules.append(out, http::Variables{});
  EXPECT_EQ(out, "");
}

TEST(EdgeHeaderRules, RequestHeadGetsRulesAndRewriteInOnePass) {
  http::RequestParser parser;
  ASSERT_FALSE(http::parse_request_head(
      parser, "GET /api/users?x=1 HTTP/1.1\r\nHost: h\r\nX-Debug: 1\r\nX-Env: dev\r\nVia: 1.0 a\r\n\r\n"));
  http::HeaderRules rules;
  rules.apply(Names{"X-Debug"}, Pairs{{"X-Env", "prod"}}, Pairs{{"Via", "1.1 sluice"}, {"X-Id", "$request_id"}});
  const http::PathRewrite rewrite{4, "/"};
  const auto vars = sample_variables();
  std::string out;
  http::append_request_head(out, parser.get(), false, {&rewrite, &rules, &vars});
  EXPECT_EQ(out,
            "GET /users?x=1 HTTP/1.1\r\nHost: h\r\nVia: 1.0 a\r\nX-Env: prod\r\nVia: 1.1 sluice\r\n"
            "X-Id: id-1\r\n\r\n");
}

TEST(EdgeHeaderRules, ResponseHeadGetsRulesBeforeSluicesOwnLines) {
  http::ResponseParser parser;
  ASSERT_TRUE(http::parse_response_head(
      parser, "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 2\r\n\r\n", false));
  http::HeaderRules rules;
  rules.apply(Names{"Server"}, Pairs{{"X-Served-By", "$server"}}, {});
  const auto vars = sample_variables();
  std::string out;
  http::append_response_head(out, parser.get(), http::plan_response(parser, false, 11, false), 11, 1,
                             &rules, &vars);
  EXPECT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Served-By: app-1\r\nConnection: close\r\n\r\n");
}

std::string rewritten(std::string_view target, std::size_t prefix, std::string replacement) {
  std::string out;
  http::append_rewritten_target(out, target, {prefix, std::move(replacement)});
  return out;
}

TEST(EdgePathRewrite, StripPrefixKeepsSlashAndQuery) {
  // strip_prefix is rewrite_prefix "/".
  EXPECT_EQ(rewritten("/api/users?x=1", 4, "/"), "/users?x=1");
  EXPECT_EQ(rewritten("/api", 4, "/"), "/");
  EXPECT_EQ(rewritten("/api?x=1", 4, "/"), "/?x=1");
  EXPECT_EQ(rewritten("/api/", 5, "/"), "/");
  EXPECT_EQ(rewritten("/api/a/b", 5, "/"), "/a/b");
  EXPECT_EQ(rewritten("http://h/api/a", 4, "/"), "/a");  // absolute-form: its path
}

TEST(EdgePathRewrite, RewritePrefixJoinsWithOneSlash) {
  EXPECT_EQ(rewritten("/api/users?q=/x", 4, "/v2/"), "/v2/users?q=/x");
  EXPECT_EQ(rewritten("/api/users", 5, "/v2"), "/v2/users");
  EXPECT_EQ(rewritten("/api/users", 5, "/v2/"), "/v2/users");
  EXPECT_EQ(rewritten("/api", 4, "/v2/"), "/v2/");
  EXPECT_EQ(rewritten("/api?a", 4, "/v2"), "/v2?a");
}

TEST(EdgeFixedAnswer, RedirectWithVariables) {
  http::FixedAnswer a;
  std::string why;
  a.status = 301;
  a.location = *http::Template::parse("https://$host$request_uri", http::TemplateText::uri, &why);
  std::string out;
  EXPECT_EQ(http::append_fixed_answer(out, a, sample_variables(), nullptr, true, false), 0u);
  EXPECT_EQ(out, "HTTP/1.1 301 Moved Permanently\r\nContent-Length: 0\r\n"
                 "Location: https://example.com/a?b=1\r\nX-Request-Id: id-1\r\n\r\n");
}

TEST(EdgeFixedAnswer, BodyRulesAndClose) {
  http::FixedAnswer a;
  std::string why;
  a.status = 503;
  a.body = *http::Template::parse("maintenance of $upstream\n", http::TemplateText::body, &why);
  a.content_type = "text/plain";
  http::HeaderRules rules;
  rules.apply({}, Pairs{{"Retry-After", "120"}}, {});
  std::string out;
  EXPECT_EQ(http::append_fixed_answer(out, a, sample_variables(), &rules, false, false), 19u);
  EXPECT_EQ(out, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 19\r\n"
                 "X-Request-Id: id-1\r\nRetry-After: 120\r\nConnection: close\r\n\r\nmaintenance of app\n");
  out.clear();
  http::append_fixed_answer(out, a, sample_variables(), &rules, true, true);  // HEAD: no body
  EXPECT_TRUE(out.ends_with("Retry-After: 120\r\n\r\n")) << out;
  out.clear();
  http::append_fixed_answer(out, a, sample_variables(), &rules, true, true, 10);  // HTTP/1.0 keep-alive
  EXPECT_TRUE(out.ends_with("Retry-After: 120\r\nConnection: keep-alive\r\n\r\n")) << out;
}

TEST(EdgeFixedAnswer, AResponseRuleOverridesTheAnswersOwnField) {
  http::FixedAnswer a;
  std::string why;
  a.status = 200;
  a.body = *http::Template::parse("<p>hi</p>", http::TemplateText::body, &why);
  a.content_type = "text/plain";
  http::HeaderRules rules;
  rules.apply({}, Pairs{{"Content-Type", "text/html"}}, {});
  std::string out;
  http::append_fixed_answer(out, a, sample_variables(), &rules, true, false);
  EXPECT_EQ(out.find("text/plain"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Type: text/html\r\n"), std::string::npos) << out;
}

TEST(EdgeHost, WithoutPort) {
  EXPECT_EQ(http::host_without_port("example.com:8080"), "example.com");
  EXPECT_EQ(http::host_without_port("[::1]:80"), "[::1]");
  EXPECT_EQ(http::host_without_port("example.com"), "example.com");
}

}  // namespace
