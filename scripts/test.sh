#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install what is missing, build, and run every unit
# test (GoogleTest via ctest) and every integration test (pytest driving the real binaries).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

echo "== unit tests"
ctest --test-dir build/release --output-on-failure -j "$(nproc)" --timeout 120

echo "== test origin smoke test"
/usr/bin/python3 tools/origin/smoke_test.py build/release/sluice-origin

echo "== integration tests"
# Debian's interpreter, where python3-pytest lives (a pyenv or venv python3 may shadow it).
SLUICE_BUILD_DIR="$PWD/build/release" /usr/bin/python3 -m pytest -q -p no:cacheprovider integration
