#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install what is missing, build a Release binary,
# start three demo origins on 127.0.0.1:9001-9003 and run sluice on conf/sluice.toml in front of
# them. Then `curl localhost:8080/` answers from app-1, app-2, app-3 in turn. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=build/release

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for i in 1 2 3; do
  "$bin/sluice-origin" --listen "127.0.0.1:900$i" --name "app-$i" >/dev/null &
  pids+=($!)
done
echo "demo origins on 127.0.0.1:9001-9003; sluice on http://127.0.0.1:8080 (Ctrl-C to stop)"
"$bin/sluice" run --config conf/sluice.toml
