#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install what is missing, build, and run every unit
# test (GoogleTest via ctest), the allocations per request of the release build (none: above
# 0.01 fails), and every integration test (pytest driving the real binaries), the
# same again under AddressSanitizer + UBSan, the multi-threaded parts under ThreadSanitizer, and
# each fuzz target for a bounded time (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Phase timings, printed at the end (and on failure) so that CI time stays visible.
timings=()
phase_start=$SECONDS
phase_name=""
phase() {
  if [[ -n $phase_name ]]; then timings+=("$(printf '%5ds  %s' $((SECONDS - phase_start)) "$phase_name")"); fi
  phase_name=$1
  phase_start=$SECONDS
  [[ -n $phase_name ]] && echo "== $phase_name"
  return 0
}
report_timings() {
  phase ""
  echo "== phase timings"
  printf '%s\n' "${timings[@]}"
  echo "total ${SECONDS}s"
}
trap report_timings EXIT

# Debian's interpreter, where python3-pytest lives (a pyenv or venv python3 may shadow it).
pytest=(/usr/bin/python3 -m pytest -q -p no:cacheprovider)

phase "install dependencies"
scripts/install-deps.sh

# The Debian root that integration/test_systemd_units.py boots (scripts/systemd-root.sh): cached in
# /var/cache/sluice after the first run; that first time it is made (a download, about a minute) in
# the background while sluice builds. The test waits for it (flock) and reports its errors.
mkdir -p build
scripts/systemd-root.sh > build/systemd-root.log 2>&1 &

phase "release build"
scripts/build.sh

# The sanitizer and fuzz trees build in the background from here on, at idle priority (SCHED_IDLE:
# they get only the CPU time the release tests leave unused, so the tests' timing is as without
# them). Each phase that needs a tree waits for it; the wait is its phase's time.
idle=(nice -n 19)
chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
background_builds() {
  BUILD_DIR=build/asan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 \
    -DSLUICE_SANITIZE=address,undefined -DSLUICE_BUILD_BENCH=OFF >build/asan-build.log 2>&1
  echo done >build/asan-build.done
  BUILD_DIR=build/tsan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=thread \
    -DSLUICE_BUILD_BENCH=OFF >build/tsan-build.log 2>&1
  echo done >build/tsan-build.done
  scripts/fuzz.sh build >build/fuzz-build.log 2>&1
}
rm -f build/asan-build.done build/tsan-build.done
# Its own process group, so that a failing run stops it with everything it started.
setsid "${idle[@]}" bash -c "$(declare -f background_builds); set -euo pipefail; background_builds" &
background=$!
trap 'kill -- -"$background" 2>/dev/null; report_timings' EXIT
# Waits until a background tree is built; on a build failure prints its log and fails.
await_build() {
  local name=$1
  while [[ ! -f build/$name-build.done ]]; do
    if ! kill -0 "$background" 2>/dev/null; then
      [[ -f build/$name-build.done ]] && return 0
      tail -60 "build/$name-build.log"
      echo "$name build failed" >&2
      exit 1
    fi
    sleep 1
  done
}

phase "unit tests"
ctest --test-dir build/release --output-on-failure -j "$(nproc)" --timeout 120

phase "allocations per request"
# The hot path allocates nothing per request: plain and TLS keep-alive GETs under valgrind.
/usr/bin/python3 bench/allocs_per_request.py build/release 300 --max=0.01

phase "function lengths"
# No function in src/ over 60 lines.
scripts/function_lengths.py --max 60 src

phase "config use"
# No config string compared outside src/config (closed sets are enums the loader parses), and no
# more key names written outside their key table than the count the script records.
/usr/bin/python3 scripts/check_config_use.py

phase "test origin smoke test"
/usr/bin/python3 tools/origin/smoke_test.py build/release/sluice-origin

phase "integration tests"
SLUICE_BUILD_DIR="$PWD/build/release" "${pytest[@]}" integration

# Sanitizer runs: any report fails. UBSan is built not to recover (CMakeLists.txt) and ASan aborts
# on its first report; the integration fixture fails a test whose sluice printed a report, and
# stops sluice with SIGTERM so that LeakSanitizer checks it at exit. No suppressions.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

phase "ASan+UBSan build (the rest of it)"
# -O1 (background_builds above): several times faster than -O0 under ASan and still exact stacks.
await_build asan

phase "ASan+UBSan: unit tests"
# The tests in two processes, one half each, both at once: one process per test (ctest, as the
# release tree runs them above) spends nearly all its time starting the instrumented binary, about
# 280 s for what runs here in under 20 s. LeakSanitizer checks each process at its exit.
asan_units() {
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$1 timeout 900 build/asan/sluice_tests --gtest_brief=1 \
    >"build/asan-units-$1.log" 2>&1
}
asan_units 0 & first=$!
asan_units 1 & second=$!
failed=0
wait "$first" || failed=1
wait "$second" || failed=1
if ((failed)); then
  grep -h -B2 -A40 -E '^\[  FAILED  \]|ERROR: (Address|Leak)Sanitizer|runtime error' build/asan-units-*.log | head -200
  echo "ASan+UBSan unit tests failed (build/asan-units-0.log, build/asan-units-1.log)" >&2
  exit 1
fi
tail -n 1 build/asan-units-0.log build/asan-units-1.log
ctest --test-dir build/asan --output-on-failure -R '^layers_' --timeout 300

phase "ASan+UBSan: integration tests"
SLUICE_BUILD_DIR="$PWD/build/asan" "${pytest[@]}" integration

phase "ThreadSanitizer build (the rest of it)"
# The tests where threads share balancers, health state, budgets and config snapshots.
await_build tsan

phase "ThreadSanitizer: unit tests"
build/tsan/sluice_tests --gtest_brief=1 \
  --gtest_filter='*Concurrency*:*Concurrent*:*Threads*:RetryBudget*:HealthServer*:HealthEjectionGuard*:Mailbox*'

phase "ThreadSanitizer: multi-worker integration tests"
# sluice with 2 workers + the control thread: reloads under load (weighted balancer, health
# verdicts kept across snapshots), balancers shared by workers, probes and ejection feeding
# health state that workers read, drain under load, SIGTERM with requests in flight.
SLUICE_BUILD_DIR="$PWD/build/tsan" "${pytest[@]}" \
  "integration/test_operations.py::test_fifty_reloads_under_load_fail_no_request_keep_health_and_apply_a_weight_change" \
  integration/test_operations.py::test_drain_under_load_lets_ten_slow_requests_finish_and_sends_nothing_new \
  integration/test_operations.py::test_metrics_and_status_count_what_the_test_sent \
  integration/test_balancing.py \
  integration/test_active_health.py::test_a_killed_origin_is_out_within_fall_probes_and_back_after_rise \
  integration/test_lifecycle.py::test_sigterm_lets_in_flight_requests_finish_then_exits_0

phase "fuzzing: each target 30 s"
wait "$background" || { tail -60 build/fuzz-build.log; echo "fuzz build failed" >&2; exit 1; }
trap report_timings EXIT
scripts/fuzz.sh 30
phase ""
