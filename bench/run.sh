#!/usr/bin/env bash
# The side-by-side benchmark: sluice vs nginx vs HAProxy, one worker each pinned to
# CPU 1, wrk and three origins on CPU 0, figures per proxy CPU-second. Installs what is missing,
# builds sluice (Release) and writes bench/results/<date>-<commit>.md and .json.
#
# Usage: bench/run.sh [--rounds N] [--duration S] [--scenarios small,1k,64k,close,reuse,tls,tls-handshake,h2c,h2-tls,grpc,idle,bursts,startup,instr,...]
#                     [--workers 1|2] [--only-sluice] [--help for every option]
# BUILD_DIR (default build/release) is where sluice is built and taken from. --pgo: sluice as the
# package is built, with profile-guided optimisation (scripts/build-pgo.sh, BUILD_DIR build/pgo).
# Everything runs on 127.0.0.1, bounded in time; every process started is ended by PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

# --help and --render (rewrite an earlier result's markdown) measure nothing: no install, no build.
setup=1
pgo=0
for arg in "$@"; do
  [[ "$arg" == "-h" || "$arg" == "--help" || "$arg" == --render* ]] && setup=0
  [[ "$arg" == "--pgo" ]] && pgo=1
done
if ((pgo)); then
  export BUILD_DIR=${BUILD_DIR:-build/pgo}
else
  export BUILD_DIR=${BUILD_DIR:-build/release}
fi
if ((setup)); then
  scripts/install-deps.sh --bench
  if ((pgo)); then
    scripts/build-pgo.sh >&2
  else
    scripts/build.sh >&2
  fi
fi

# 2,000 idle client connections are open at both ends at once; nginx asks for 16,000
# descriptors, HAProxy about as many (maxconn 8000).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# The harness itself (and so wrk, the origins and the Python clients it starts) runs on CPU 0;
# it pins each proxy to CPU 1. Debian's python3, standard library only.
PYTHONPATH=bench taskset -c 0 /usr/bin/python3 -m sidebyside "$@" &
harness=$!
stop_harness() {
  trap - EXIT INT TERM
  if kill -0 "$harness" 2>/dev/null; then
    kill -TERM "$harness" 2>/dev/null || true
    wait "$harness" 2>/dev/null || true
  fi
}
trap stop_harness EXIT
trap 'stop_harness; exit 130' INT
trap 'stop_harness; exit 143' TERM
wait "$harness"
