#!/usr/bin/env bash
# Instructions per proxied request (valgrind --tool=callgrind) and startup time (spawn to the
# first proxied 200) for sluice, nginx and HAProxy, in the side-by-side benchmark's setup: one
# worker each, the same three origins, upstream keep-alive, `GET /` with a 6-byte body. For each
# proxy, two runs under callgrind: 1,000 requests, then 1,000 + 20,000; (Ir₂ − Ir₁) / 20,000 is
# the steady-state cost of a request, and the per-function difference of the two profiles says
# where it goes (grouped for sluice: Beast, Asio, our scanner, ...). Takes 2–4 minutes.
#
# Usage: bench/callgrind.sh [--instr-requests N] [--instr-connections N] [--keep-workdir] [...]
#   --instr-connections 64: wrk with 64 keep-alive connections for --duration seconds instead of
#   one sequential client (several requests per wake-up, as in the `small` scenario).
# SLUICE_CALLGRIND_ARGS: more callgrind options, e.g. "--cache-sim=yes --branch-sim=yes" (the
# .out files, with --keep-workdir, then hold D1/LL misses and mispredictions per function).
# Any option of bench/run.sh is accepted. Writes bench/results/<date>-<commit>-instr.md/.json.
set -euo pipefail
exec "$(dirname "$0")/run.sh" --scenarios startup,instr --tag instr "$@"
