#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install what is missing, build, and run every unit
# test (GoogleTest via ctest) and every integration test (pytest driving the real binaries).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

echo "== unit tests"
ctest --test-dir build/release --output-on-failure -j "$(nproc)" --timeout 120

echo "== ThreadSanitizer: the tests where threads share balancers, health state and budgets"
# A separate build with -fsanitize=thread (ccache keeps it quick after the first run). Any report
# fails the run: TSan exits non-zero when it found a race.
BUILD_DIR=build/tsan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=thread \
  -DSLUICE_BUILD_BENCH=OFF
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build/tsan/sluice_tests --gtest_brief=1 \
  --gtest_filter='*Concurrency*:*Concurrent*:*Threads*:RetryBudget*:HealthServer*:HealthEjectionGuard*'

echo "== test origin smoke test"
/usr/bin/python3 tools/origin/smoke_test.py build/release/sluice-origin

echo "== integration tests"
# Debian's interpreter, where python3-pytest lives (a pyenv or venv python3 may shadow it).
SLUICE_BUILD_DIR="$PWD/build/release" /usr/bin/python3 -m pytest -q -p no:cacheprovider integration
