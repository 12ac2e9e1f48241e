#!/usr/bin/env bash
# Instructions per operation of the data-path micro-benchmarks (bench/micro/data_path_bench.cpp),
# counted by valgrind --tool=callgrind: the inclusive cost of one call of run_request(),
# run_response(), run_index_request(), run_index_response(), account() or AccessLog::write(),
# averaged over every call of the run. Unlike ns/op this does not
# move with the machine's load. Usage: bench/micro/instr.sh [BUILD_DIR] (default build/release).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-${BUILD_DIR:-build/release}}/sluice_micro_bench
[[ -x "$bin" ]] || { echo "$bin missing: build first (scripts/build.sh)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind missing: scripts/install-deps.sh --bench" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| benchmark | function | calls | instructions per call |"
echo "|---|---|---|---|"
for spec in BM_RequestBrowser:run_request BM_RequestBrowserScan:run_request \
            BM_RequestBrowserParse:run_request BM_RequestWrk:run_request \
            BM_RequestBrowserNoArena:run_request BM_ResponseSmall:run_response \
            BM_ResponseSmallScan:run_response BM_ResponseSmallParse:run_response \
            BM_ResponseApp:run_response BM_MetricsIncrement:account \
            BM_IndexRequestBrowser:run_index_request BM_IndexRequestBrowserParse:run_index_request \
            BM_IndexRequestWrk:run_index_request BM_IndexResponseSmall:run_index_response \
            BM_IndexResponseSmallParse:run_index_response BM_IndexResponseApp:run_index_response \
            BM_AccessLogText:AccessLog::write BM_AccessLogJson:AccessLog::write; do
  name=${spec%%:*} fn=${spec#*:}
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" --dump-instr=no --dump-line=no \
    "$bin" --benchmark_filter="^$name\$" --benchmark_min_time=0.05 >/dev/null 2>&1
  PYTHONPATH=bench /usr/bin/python3 - "$work/$name.out" "$name" "$fn" <<'PY'
import sys
from sidebyside import profile
path, name, fn = sys.argv[1:]
_, calls = profile.parse(path)
hits = [(k, v) for k, v in calls.items() if k and f"::{fn}(" in k]
count = sum(v[0] for _, v in hits)
inclusive = sum(v[1] for _, v in hits)
print(f"| {name} | {fn} | {count:,} | {inclusive / count:,.0f} |" if count else f"| {name} | {fn} | 0 | — |")
PY
done
