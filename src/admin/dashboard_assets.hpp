#pragma once
// The dashboard's page, script and style sheet, compiled into the binary (dashboard_assets.cpp):
// nothing is read from disk or fetched from elsewhere, so the page is exactly what was built.
#include <string_view>

namespace sluice::admin {

struct Asset {
  std::string_view content_type;
  std::string_view body;
};

// "" and "dashboard": the page; "dashboard.js", "dashboard.css"; anything else: nullptr.
const Asset* dashboard_asset(std::string_view name);

}  // namespace sluice::admin
