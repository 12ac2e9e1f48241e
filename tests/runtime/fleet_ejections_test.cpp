// Fleet mode's shared ejections (runtime/fleet_ejections.hpp): the record's encoding and which
// records an instance applies.
#include "sluice/runtime/fleet_ejections.hpp"

#include <gtest/gtest.h>

namespace sluice::fleet {
namespace {

TEST(FleetEjections, RecordRoundTrip) {
  const SharedEjection e{"lb-1", "app", "app-2", 1700000000123, "3 failures in 10s: 502; ejected for 10s"};
  const auto text = encode_ejection(e);
  EXPECT_EQ(text, R"({"from":"lb-1","upstream":"app","server":"app-2","until_ms":1700000000123,)"
                  R"("reason":"3 failures in 10s: 502; ejected for 10s"})");
  const auto back = decode_ejection(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->from, "lb-1");
  EXPECT_EQ(back->server, "app-2");
  EXPECT_EQ(back->until_ms, 1700000000123);
  EXPECT_EQ(back->reason, e.reason);
}

TEST(FleetEjections, ARecordOfAnotherShapeIsRefused) {
  EXPECT_FALSE(decode_ejection("not json"));
  EXPECT_FALSE(decode_ejection(R"({"from":"lb-1","upstream":"app","server":"a","reason":"r"})"));
  EXPECT_FALSE(decode_ejection(R"({"from":"lb-1","upstream":"app","server":"a","until_ms":"5","reason":"r"})"));
}

TEST(FleetEjections, ARecordIsAppliedOnceByTheOthersAndNotPastItsEnd) {
  EjectionShare share;
  const SharedEjection e{"lb-1", "app", "a", 5000, "r"};
  EXPECT_FALSE(share.take(e, "lb-1", 1000)) << "its own";
  EXPECT_TRUE(share.take(e, "lb-2", 1000));
  EXPECT_FALSE(share.take(e, "lb-2", 1200)) << "the same record read again";
  EXPECT_TRUE(share.take({"lb-3", "app", "a", 9000, "r"}, "lb-2", 1300)) << "a newer ejection";
  EXPECT_FALSE(share.take({"lb-1", "app", "b", 5000, "r"}, "lb-2", 5000)) << "over";
}

}  // namespace
}  // namespace sluice::fleet
