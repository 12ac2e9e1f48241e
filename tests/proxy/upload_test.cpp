#include "sluice/proxy/upload.hpp"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using F = FailureKind;
using Stall = UploadState::Stall;
using namespace std::chrono_literals;

TEST(Upload, ExpiryWhileReadingTheClientIsTheClientsStall) {
  UploadState s;
  s.reading_client = true;
  s.expired();
  EXPECT_EQ(s.stall, Stall::client);
}

TEST(Upload, ExpiryWhileWritingToTheOriginIsTheOriginsStall) {
  UploadState s;
  s.expired();
  EXPECT_EQ(s.stall, Stall::origin);
  s.reading_client = true;  // a later expiry does not rewrite the first verdict
  s.expired();
  EXPECT_EQ(s.stall, Stall::origin);
}

// The response side stopping the upload cancels its pending operation: that is no failure,
// unless the upload had stalled first.
TEST(Upload, AStopIsNoFailureUnlessItFollowsAStall) {
  UploadState s;
  EXPECT_FALSE(s.stopped());
  s.stop = true;
  EXPECT_TRUE(s.stopped());
  s.expired();
  EXPECT_FALSE(s.stopped());

  // In the order the comment names: the stall first, then the response side's stop.
  UploadState stalled;
  stalled.expired();
  stalled.stop = true;
  EXPECT_FALSE(stalled.stopped());
  EXPECT_EQ(stalled.stall, Stall::origin);

  // Once the body is all sent an expiry is no stall: the stop stays a plain stop.
  UploadState sent;
  sent.sending = false;
  sent.stop = true;
  sent.expired();
  EXPECT_TRUE(sent.stopped());
}

TEST(Upload, ExpiryAfterTheLastByteIsNoStall) {
  // Then it is the response deadline that passed: response_timeout, not send_timeout.
  UploadState s;
  s.sent_all(Clock::time_point{});
  s.expired();
  EXPECT_EQ(s.stall, Stall::none);
}

TEST(Upload, ResponseDeadlineCountsFromTheLastByteSent) {
  UploadState s;
  s.response_budget = 2s;
  const Clock::time_point last_byte{10s};
  s.sent_all(last_byte);
  EXPECT_FALSE(s.sending);
  EXPECT_TRUE(s.fully_sent);
  EXPECT_EQ(s.response_until, last_byte + 2s);
}

TEST(Upload, AFailedWriteStillWaitsForTheOriginsAnswer) {
  UploadState s;
  s.response_budget = 1s;
  s.send_failed(Clock::time_point{5s});
  EXPECT_FALSE(s.sending);
  EXPECT_FALSE(s.fully_sent);
  EXPECT_EQ(s.response_until, Clock::time_point{6s});
}

TEST(Upload, AnAnswerWinsOverAFailedWrite) {
  // 413 + close before the body was read: the write fails with a reset, the head arrived.
  UploadState s;
  EXPECT_EQ(upload_outcome(s, F::reset_after_send, F::none, 1 << 20), F::none);
  EXPECT_EQ(upload_outcome(s, F::none, F::none, 1 << 20), F::none);  // stopped by the answer
}

TEST(Upload, AClientFailureIsNotTheOrigins) {
  UploadState s;
  s.stall = Stall::client;
  EXPECT_EQ(upload_outcome(s, F::client_failed, F::response_timeout, 100), F::client_failed);
  EXPECT_EQ(upload_outcome(s, F::client_failed, F::none, 100), F::client_failed);
}

TEST(Upload, AnOriginStallIsASendTimeout) {
  UploadState s;
  s.stall = Stall::origin;
  // The response side was cancelled by the same expiry: its "timeout" is not the answer's.
  EXPECT_EQ(upload_outcome(s, F::send_timeout, F::response_timeout, 100), F::send_timeout);
  EXPECT_EQ(status_of(F::send_timeout), 504u);
}

TEST(Upload, NoAnswerAfterTheBodyIsTheResponsesFailure) {
  UploadState s;
  EXPECT_EQ(upload_outcome(s, F::none, F::response_timeout, 100), F::response_timeout);
  EXPECT_EQ(upload_outcome(s, F::reset_after_send, F::reset_after_send, 100), F::reset_after_send);
  EXPECT_EQ(upload_outcome(s, F::reset_before_send, F::reset_after_send, 0), F::reset_before_send);
}

TEST(Upload, TheResponseDeadlineWaitsUntilTheOriginTookEveryByte) {
  // Written is not sent: a slow origin drains sluice's socket buffer for seconds.
  UploadState s;
  s.send_timeout = 1s;
  s.response_budget = 2s;
  s.draining = true;
  s.wrote(Clock::time_point{10s});
  EXPECT_EQ(s.drain_step(3'000'000, Clock::time_point{10s}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(2'000'000, Clock::time_point{10s + 900ms}), UploadState::Drain::progressing);
  // Still moving, so never a stall, however long it takes in total.
  EXPECT_EQ(s.drain_step(1'000'000, Clock::time_point{11s + 800ms}), UploadState::Drain::progressing);
  EXPECT_TRUE(s.sending);
  EXPECT_EQ(s.drain_step(0, Clock::time_point{12s}), UploadState::Drain::done);
  EXPECT_TRUE(s.fully_sent);
  EXPECT_EQ(s.response_until, Clock::time_point{14s});
}

TEST(Upload, AWriteWaitingForRoomProgressesWhileTheOriginTakesBytes) {
  // The kernel reports room only once a third of the buffer is free: between two such wake-ups
  // a slow origin still takes bytes, and that is progress.
  UploadState s;
  s.send_timeout = 1s;
  s.wrote(Clock::time_point{10s});
  EXPECT_EQ(s.drain_step(4'000'000, Clock::time_point{10s + 50ms}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(3'900'000, Clock::time_point{11s}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(3'800'000, Clock::time_point{11s + 950ms}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(0, Clock::time_point{12s}), UploadState::Drain::progressing);  // not the last write
  EXPECT_FALSE(s.fully_sent);
  EXPECT_EQ(s.drain_step(0, Clock::time_point{13s}), UploadState::Drain::stalled);
}

TEST(Upload, AnOriginThatStopsTakingBytesStallsAfterSendTimeout) {
  UploadState s;
  s.send_timeout = 1s;
  s.wrote(Clock::time_point{10s});
  EXPECT_EQ(s.drain_step(500, Clock::time_point{10s + 100ms}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(500, Clock::time_point{11s}), UploadState::Drain::progressing);
  EXPECT_EQ(s.drain_step(500, Clock::time_point{11s + 100ms}), UploadState::Drain::stalled);
  s.expired();
  EXPECT_EQ(s.stall, Stall::origin);
}

}  // namespace
}  // namespace sluice::proxy
