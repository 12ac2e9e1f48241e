#include "sluice/proxy/forwarder.hpp"

#include "sluice/balancer/hash.hpp"

#include <charconv>
#include <utility>

#include <spdlog/spdlog.h>

#include "sluice/health/log.hpp"

namespace sluice::proxy {

AttemptWindow AttemptWindow::of(const config::UpstreamConfig& u, Clock::time_point started) noexcept {
  const auto& retry = u.retry;
  const Clock::duration per_try =
      retry.per_try_timeout.count() != 0 ? retry.per_try_timeout : u.response_timeout;
  const Clock::duration whole =
      retry.deadline.count() != 0 ? Clock::duration(retry.deadline) : per_try * retry.attempts;
  return {per_try, started + whole};
}

bool retry_after_exceeds(std::string_view after, Clock::time_point now,
                         Clock::time_point deadline) noexcept {
  unsigned long seconds = 0;
  const auto r = std::from_chars(after.data(), after.data() + after.size(), seconds);
  return !after.empty() && r.ec == std::errc() && now + std::chrono::seconds(seconds) > deadline;
}

Clock::duration pooled_idle_time(Clock::duration keepalive_timeout,
                                 std::optional<std::chrono::seconds> origin) noexcept {
  if (!origin) return keepalive_timeout;
  const auto n = *origin;
  return std::min<Clock::duration>(keepalive_timeout,
                                   n > std::chrono::seconds(2) ? n - std::chrono::seconds(1) : n / 2);
}


void report_attempt(const Upstream& upstream, Endpoint& ep, unsigned worker, const Failure& f) {
  if (!health::tells_of_server(f) || !ep.has_health()) return;
  if (f.failed()) EndpointCounters::bump(ep.counters(worker).failures);
  const auto t = upstream.fail_on().counts(f) ? ep.health().live_failure(f) : ep.health().live_success();
  if (t) health::log_transition(upstream.name(), ep, *t);
}

void record_first_byte_time(const Upstream& upstream, Endpoint& ep, const AttemptRecord& record) {
  // Only least_time reads the estimate: other policies' requests pay neither its exp() nor its
  // compare-and-swap.
  if (upstream.config().balance != config::Balance::least_time) return;
  if (record.first_byte == Clock::time_point{}) return;  // no answer began: nothing to time
  ep.first_byte_time().observe(record.first_byte - record.attempt_start, record.first_byte,
                               upstream.config().decay);
}

namespace {

// True when every server is draining (an operator took them all out, not their health).
bool all_draining(const Upstream& upstream) {
  for (const Endpoint* ep : upstream.endpoints())
    if (!ep->draining()) return false;
  return true;
}

// True when some server could take the request but for max_conns (so waiting can help).
bool saturated(const Upstream& upstream) {
  for (Endpoint* ep : upstream.endpoints())
    if (ep->available() && ep->at_limit()) return true;
  return false;
}

}  // namespace

Forwarder::Forwarder(const Upstream& upstream, const Clock& clock, unsigned worker,
                     RequestFacts facts, PickContext base, AttemptRecord& record)
    : upstream_(upstream), clock_(clock), worker_(worker), facts_(facts), base_(base),
      record_(record), window_(AttemptWindow::of(upstream.config(), clock.now())) {
  base_.worker = worker;  // the balancer moves this worker's own cursor
  upstream.retry_budget(worker).begin_request(clock.now());
}

Forwarder::~Forwarder() {
  if (ticket_ != 0) upstream_.queue().leave(ticket_);
}

PickContext Forwarder::context() const noexcept {
  PickContext ctx = base_;
  ctx.tried = &tried_;
  return ctx;
}

Forwarder::Step Forwarder::refuse(ProxyError error) noexcept {
  error_ = error;
  return {Step::Kind::refuse};
}

Forwarder::Step Forwarder::next() {
  PickContext ctx = context();
  auto pick = upstream_.pick(ctx);
  if (!pick && tried_.empty() && saturated(upstream_)) return enter_queue();
  if (!pick && !pick_fallback(ctx, pick)) return {Step::Kind::refuse};
  return begin_attempt(pick.index, false);
}

// Every candidate is at max_conns: the upstream's bounded queue, if it has one.
Forwarder::Step Forwarder::enter_queue() {
  const auto& u = upstream_.config();
  if (u.queue_size == 0) return refuse({503, "no server available"});
  ticket_ = upstream_.queue().enter(u.queue_size);
  if (ticket_ == 0) return refuse({503, "queue full"});
  queue_until_ = clock_.now() + Clock::duration(u.queue_timeout);
  return queue_step(true);
}

// First in the queue, a free slot is taken here (the attempt's, reserved); else the request
// waits on, until queue_timeout or until the client side is gone.
Forwarder::Step Forwarder::queue_step(bool open) {
  auto& queue = upstream_.queue();
  if (queue.is_head(ticket_)) {
    const auto pick = upstream_.pick(context());
    if (pick && upstream_.endpoint(pick.index)->try_begin_request()) {
      queue.leave(std::exchange(ticket_, 0));
      return begin_attempt(pick.index, true);
    }
  }
  if (!open || clock_.now() >= queue_until_) {
    queue.leave(std::exchange(ticket_, 0));
    return refuse({503, "queue timeout"});
  }
  return {Step::Kind::wait_in_queue};
}

// No server was picked. The first time: none configured, or none healthy (panic mode spreads
// over all of them if the upstream allows it). Later: every server was tried, and the last
// failure stands. False (with error_): no server will do.
bool Forwarder::pick_fallback(PickContext& ctx, Pick& pick) {
  if (tried_.empty()) {
    if (upstream_.endpoints().empty()) {
      error_ = {503, "no servers", upstream_.name()};
      return false;
    }
    if (upstream_.config().panic_when_all_down) {
      ctx.panic = true;
      pick = upstream_.pick(ctx);
      if (pick) spdlog::warn("upstream {}: no healthy server, panic mode: spreading over all servers",
                             upstream_.name());
    }
    if (!pick)
      error_ = {503, all_draining(upstream_) ? "every server drained" : "no healthy server",
                upstream_.name()};
    return static_cast<bool>(pick);
  }
  if (!last_.failed()) {  // all candidates were at max_conns
    error_ = {503, "no server available"};
    return false;
  }
  note_skip(RetrySkip::no_other_server);
  error_ = not_retried(last_);
  return false;
}

// The picked server is tried (marked so), and its slot taken unless the queue took it already.
// max_conns is a hard cap: the pick only saw a snapshot of in_flight, so the slot is taken
// atomically here; another worker may have taken the last one (pick again).
Forwarder::Step Forwarder::begin_attempt(std::uint32_t index, bool reserved) {
  tried_.add(index);
  Endpoint& ep = *upstream_.endpoint(index);
  if (!reserved && !ep.try_begin_request()) return {Step::Kind::pick_again};
  record_.server = &ep;
  note_server(ep);
  ++record_.attempts;
  record_.attempt_start = clock_.now();
  record_.upstream_ready = record_.first_byte = {};
  return {Step::Kind::attempt, &ep};
}

AfterAttempt Forwarder::after(Endpoint& ep, const Failure& last, bool replayable,
                              std::string_view retry_after) {
  report_attempt(upstream_, ep, worker_, last);
  record_first_byte_time(upstream_, ep, record_);
  last_ = last;
  facts_.body_kept = replayable;
  const auto& retry = upstream_.config().retry;
  const bool attempts_left = attempt_ < retry.attempts;
  if (last.failed()) {
    spdlog::debug("upstream {} server {}: {}", upstream_.name(), ep.identity(), sluice_error(last));
    if (!attempts_left) note_skip(RetrySkip::attempts_exhausted);
  }
  const auto next = proxy::after_attempt(last, is_listed(retry, last), attempts_left,
                                         [&] { return may_retry(last, retry_after); });
  if (next == AfterAttempt::give_up) error_ = not_retried(last);
  return next;
}

// Whether the failed attempt may be retried: eligibility from the facts, then the deadline, the
// servers left and the budget. Counts the reason when it may not.
bool Forwarder::may_retry(const Failure& last, std::string_view retry_after) {
  const auto& retry = upstream_.config().retry;
  const auto now = clock_.now();
  auto skip = eligibility(retry, last, facts_);
  if (skip == RetrySkip::none && now >= window_.deadline) skip = RetrySkip::deadline;
  if (skip == RetrySkip::none) {
    // Is any untried server left? Asked of the endpoints, not the balancer: a pick() here would
    // move its cursor and steal the next request's turn.
    const auto probe = context();
    const auto endpoints = upstream_.endpoints();
    bool any = false;
    for (std::uint32_t i = 0; i < endpoints.size() && !any; ++i) any = !sluice::skip(*endpoints[i], i, probe);
    if (!any) skip = RetrySkip::no_other_server;
  }
  // A 503 asking to come back later than our deadline allows is not retried (Retry-After).
  if (skip == RetrySkip::none && last.status == 503 &&
      retry_after_exceeds(retry_after, now, window_.deadline))
    skip = RetrySkip::deadline;
  if (skip == RetrySkip::none && !upstream_.retry_budget(worker_).try_retry(now))
    skip = RetrySkip::budget_exhausted;
  if (skip != RetrySkip::none) {
    note_skip(skip);
    return false;
  }
  if (record_.server != nullptr)
    EndpointCounters::bump(
        record_.server->counters(worker_).retries[static_cast<std::size_t>(last.kind)]);
  return true;
}

Clock::duration Forwarder::backoff(double unit) const {
  const auto delay = backoff_delay(upstream_.config().retry, attempt_, unit);
  if (delay.count() <= 0) return Clock::duration::zero();
  return std::min<Clock::duration>(delay, window_.deadline - clock_.now());
}

bool Forwarder::next_attempt() {
  if (clock_.now() >= window_.deadline) {
    note_skip(RetrySkip::deadline);
    error_ = {504, "deadline"};
    return false;
  }
  ++attempt_;
  return true;
}

// The answer to a failure that was not retried: its status and Sluice-Error, with the reason it
// was not retried ("upstream reset; not retried: retry budget exhausted").
ProxyError Forwarder::not_retried(const Failure& f) const noexcept {
  return error_for(f, record_.skip != RetrySkip::none ? explain(record_.skip) : std::string_view());
}

void Forwarder::note_server(const Endpoint& ep) {
  if (record_.tried_count < AttemptRecord::capacity) record_.tried[record_.tried_count++] = &ep;
}

std::string_view AttemptRecord::servers_tried(ServersText& out) const {
  out.clear();
  for (std::size_t i = 0; i < tried_count; ++i) {
    const auto& id = tried[i]->identity();
    if (out.size() + id.size() + 1 > out.capacity()) break;
    if (!out.empty()) out.push_back(',');
    out.append(id);
  }
  return {out.data(), out.size()};
}

void Forwarder::note_skip(RetrySkip skip) {
  record_.skip = skip;
  if (record_.server != nullptr)
    EndpointCounters::bump(record_.server->counters(worker_).retry_skips[static_cast<std::size_t>(skip)]);
}

PickContext request_pick_context(const Upstream& upstream, const http::RequestHead& req,
                                 std::string_view client_ip) {
  PickContext ctx;
  if (const auto& key = upstream.hash_key()) {
    if (const auto bytes = key->extract(req, req.target(), client_ip)) {
      ctx.hash = hash_key_bytes(*bytes);
      ctx.has_hash = true;
    }
  }
  return ctx;
}

}  // namespace sluice::proxy
