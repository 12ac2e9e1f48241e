#pragma once
// Test helper: the lines of a Beast container as a request head indexed by index_request_head(),
// the way the session reads a request (its consumers take only the index), after "Host: test".
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "sluice/http/head_index.hpp"

namespace sluice::http::testing {

struct IndexedRequest {
  std::string bytes;  // the index points into these
  RequestHead head;
};

inline std::unique_ptr<IndexedRequest> indexed(const Fields& fields, std::string_view target = "/") {
  auto x = std::make_unique<IndexedRequest>();
  x->bytes.append("GET ").append(target).append(" HTTP/1.1\r\nHost: test\r\n");
  for (const auto& f : fields) x->bytes.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
  x->bytes.append("\r\n");
  EXPECT_EQ(index_request_head(x->bytes, {}, x->head).result, HeadScan::Result::complete) << x->bytes;
  return x;
}

}  // namespace sluice::http::testing
