#!/usr/bin/env bash
# Slow and abusive clients, side by side: sluice vs nginx vs HAProxy, one worker each pinned to
# CPU 1; slowhttptest, the hostile clients, the legit client and three origins on CPU 0. Reports
# the legit client's latency during a slow-read ramp, memory per hostile connection (slow reader,
# slow body, half-sent head) and the memory returned after the attack. Installs what is missing,
# builds sluice (Release) and writes bench/results/<date>-<commit>-abuse.md and .json.
#
# Usage: bench/abuse.sh [--rounds N] [--only sluice,haproxy] [--phases ramp,slow_read,...]
#                       [--help for every option]
# BUILD_DIR (default build/release) is where sluice is built and taken from.
# Everything runs on 127.0.0.1, bounded in time; every process started is ended by PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

setup=1
for arg in "$@"; do
  [[ "$arg" == "-h" || "$arg" == "--help" ]] && setup=0
done
export BUILD_DIR=${BUILD_DIR:-build/release}
if ((setup)); then
  scripts/install-deps.sh --bench
  scripts/build.sh >&2
fi

# 1,000 slow readers hold a client and an origin connection each in every proxy; slowhttptest
# asks for a descriptor per connection too.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# The harness (and so slowhttptest, the origins and its Python clients) runs on CPU 0; it pins
# each proxy to CPU 1. Debian's python3, standard library only. exec: the harness itself gets
# SIGTERM/SIGINT and ends every process it started, by PID.
PYTHONPATH=bench exec taskset -c 0 /usr/bin/python3 -m sidebyside.abuse "$@"
