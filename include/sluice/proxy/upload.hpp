#pragma once
// A streamed request body and the origin's answer overlap (full duplex): while the body is still
// being forwarded, the response head is read too, so that an early final answer (a 413 before
// the origin read an 8 MiB body) reaches the client instead of being lost to the reset that
// follows it. DownstreamSession runs the two as coroutines on the worker's thread (downstream_upload.cpp);
// this is what they share, and the rules that turn their two outcomes into the attempt's.
//
// Timing (docs/http.md): while the body is being sent, the attempt is bounded by `send_timeout`
// without progress (a byte read from the client or written to the origin), not by its total
// duration; once the last byte is sent, the response gets what the attempt had left when sending
// began (response_timeout, counted from the last request byte). "Sent" means taken by the
// origin's TCP: a write only hands the bytes to sluice's socket buffer (megabytes on a fast
// link), which a slow origin may take seconds to drain, and the kernel reports room in it only
// once a third is free. So while waiting for the origin, sluice looks at that buffer (SIOCOUTQ):
// fewer bytes queued than at the last look is progress, and the response deadline starts once
// it is empty.
#include <cstddef>

#include "sluice/core/clock.hpp"
#include "sluice/proxy/failure.hpp"

namespace sluice::proxy {

struct UploadState {
  // Who stopped the body's progress when send_timeout expired.
  enum class Stall : unsigned char {
    none,
    client,  // sluice was waiting for the client's bytes: 408, the client's doing
    origin,  // sluice was waiting to write to the origin: 504 upstream send timeout, the server's
  };

  Clock::duration send_timeout{};
  Clock::duration response_budget{};  // the attempt's time left when sending began
  Clock::time_point response_until = Clock::time_point::max();  // set when the last byte is sent
  bool sending = true;         // the body is still being forwarded
  bool reading_client = false;  // ... and the upload waits for the client (else for the origin)
  bool stop = false;            // the response side finished first: the upload stops
  bool client_failed = false;   // the upload failed on the client's side: the response read stops
  bool fully_sent = false;      // every request byte was taken by the origin's TCP
  bool draining = false;        // all written; the socket buffer still holds some (drain_step)
  Stall stall = Stall::none;
  std::size_t queued = static_cast<std::size_t>(-1);  // bytes in the socket buffer at the last look
  Clock::time_point last_progress{};

  // A read or write the response side cancelled (stop) is no failure; a stall is (expired()).
  bool stopped() const noexcept { return stop && stall == Stall::none; }

  enum class Drain : unsigned char { done, progressing, stalled };
  // A write to the origin made progress at `now`: the next look sets the queue's baseline.
  void wrote(Clock::time_point now) noexcept {
    last_progress = now;
    queued = static_cast<std::size_t>(-1);
  }
  // A look at the bytes `queued_now` in sluice's socket buffer while waiting for the origin:
  // done (after the last write, all taken: the response deadline starts), progressing (look
  // again), or stalled (nothing taken for send_timeout).
  Drain drain_step(std::size_t queued_now, Clock::time_point now) noexcept {
    if (draining && queued_now == 0) {
      sent_all(now);
      return Drain::done;
    }
    if (queued_now < queued) {
      queued = queued_now;
      last_progress = now;
    }
    return now - last_progress >= send_timeout ? Drain::stalled : Drain::progressing;
  }

  // The worker's tick found the deadline past while sending: whose stall it was.
  void expired() noexcept {
    if (sending && stall == Stall::none) stall = reading_client ? Stall::client : Stall::origin;
  }
  // The last request byte was written at `now`: the response deadline starts.
  void sent_all(Clock::time_point now) noexcept {
    sending = false;
    draining = false;
    fully_sent = true;
    response_until = now + response_budget;
  }
  // The write to the origin failed: the response side still reads what the origin said.
  void send_failed(Clock::time_point now) noexcept {
    sending = false;
    response_until = now + response_budget;
  }
};

// The attempt's outcome from the upload's (`upload`) and the response head's (`head`), with
// `sent` request bytes written. A response head that arrived wins (even after a failed write:
// the origin's answer is what the client gets); a client failure is not the origin's; a stalled
// write is the origin's send timeout.
FailureKind upload_outcome(const UploadState& state, FailureKind upload,
                           FailureKind head, std::uint64_t sent);

}  // namespace sluice::proxy
