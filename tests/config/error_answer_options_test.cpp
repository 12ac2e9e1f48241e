// [server] error_detail and error_pages (and a route's error_pages): what sluice's own answers
// show a client, and the pages read at load.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sluice/config/loader.hpp"

#include "load_helpers.hpp"

namespace sluice::config {
namespace {

using testing::Errors;
using testing::errors_of;

std::string page_file(std::string_view name, std::string_view text) {
  const auto path = std::filesystem::temp_directory_path() / ("sluice-test-" + std::string(name));
  std::ofstream(path) << text;
  return path.string();
}

LoadResult load(std::string_view text) { return testing::load_with_upstream(text); }

// The safe default: a public edge shows no internals.
TEST(ConfigErrorAnswers, DefaultsShowTheStatusAlone) {
  const auto r = load("");
  ASSERT_TRUE(r.ok()) << ::testing::PrintToString(errors_of(r));
  EXPECT_EQ(r.config->server.error_detail, ErrorDetail::status);
  EXPECT_TRUE(r.config->server.error_pages.empty());
  const auto* key = r.config->find_key("server.error_detail");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->value, "\"status\"");
}

TEST(ConfigErrorAnswers, PagesAreReadAtLoadByStatusThenClass) {
  const auto html = page_file("502.html", "<h1>bad gateway</h1>\n");
  const auto text = page_file("5xx.txt", "down\n");
  const auto r = load("[server]\nerror_detail = \"full\"\nerror_pages = { 502 = \"" + html +
                      "\", \"5xx\" = \"" + text + "\" }\n");
  ASSERT_TRUE(r.ok()) << ::testing::PrintToString(errors_of(r));
  const auto& pages = r.config->server.error_pages;
  EXPECT_EQ(r.config->server.error_detail, ErrorDetail::full);
  ASSERT_NE(pages.find(502), nullptr);
  EXPECT_EQ(pages.find(502)->body, "<h1>bad gateway</h1>\n");
  EXPECT_EQ(pages.find(502)->content_type, "text/html; charset=utf-8");
  ASSERT_NE(pages.find(503), nullptr);
  EXPECT_EQ(pages.find(503)->body, "down\n");
  EXPECT_EQ(pages.find(503)->content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(pages.find(404), nullptr);
}

TEST(ConfigErrorAnswers, ARoutesPagesAreItsOwn) {
  const auto html = page_file("route-404.html", "<p>nothing here</p>");
  const auto r = load("[[route]]\npath_prefix = \"/\"\nupstream = \"app\"\nerror_pages = { \"4xx\" = \"" +
                      html + "\" }\n");
  ASSERT_TRUE(r.ok()) << ::testing::PrintToString(errors_of(r));
  ASSERT_EQ(r.config->routes.size(), 1u);
  ASSERT_NE(r.config->routes[0].error_pages.find(429), nullptr);
  EXPECT_EQ(r.config->routes[0].error_pages.find(429)->body, "<p>nothing here</p>");
  EXPECT_TRUE(r.config->server.error_pages.empty());
}

TEST(ConfigErrorAnswers, BadValuesAreRefusedAtTheirKey) {
  EXPECT_EQ(errors_of(load("[server]\nerror_detail = \"none\"\n")),
            (Errors{"test.toml:2:16: server.error_detail: unknown error_detail 'none'; expected one of: "
                    "status, full"}));
  EXPECT_EQ(errors_of(load("[server]\nerror_pages = { 502 = \"/nonexistent/502.html\" }\n")),
            (Errors{"test.toml:2:23: server.error_pages.502: cannot read '/nonexistent/502.html': No such "
                    "file or directory"}));
  EXPECT_EQ(errors_of(load("[server]\nerror_pages = { 200 = \"x\" }\n")),
            (Errors{"test.toml:2:17: server.error_pages.200: expected a status 400..599 or a class "
                    "\"4xx\" or \"5xx\""}));
  EXPECT_EQ(errors_of(load("[server]\nerror_pages = { \"5xx\" = 5 }\n")),
            (Errors{"test.toml:2:25: server.error_pages.5xx: expected a file name, got integer"}));
  EXPECT_EQ(errors_of(load("[server]\nerror_pages = \"x\"\n")).size(), 1u);
}

}  // namespace
}  // namespace sluice::config
