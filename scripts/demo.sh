#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install what building sluice needs, build the
# Release `sluice` and `sluice-origin` into build/demo (no tests: scripts/test.sh installs and
# builds those), start three demo origins on 127.0.0.1:9001-9003 and run sluice on
# conf/sluice.toml, with one worker, in front of them. Then `curl localhost:8080/` answers from
# app-1, app-2, app-3 in turn. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build-only
bin=build/demo
# Without ccache: no other build directory can reuse these objects (each names its own module
# include roots), and storing them adds to a first build's CPU.
CCACHE_DISABLE=1 BUILD_DIR=$bin TARGETS="sluice sluice-origin" scripts/build.sh \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF

# One worker. Each worker keeps its own round-robin cursor (docs/balancing.md): with one per core
# (conf/sluice.toml's `workers = 0`, right for real use), consecutive connections accepted by
# different workers do not visit the servers strictly in turn. The demo shows the rotation.
config=$bin/demo.toml
sed -E 's/^workers = [0-9]+/workers = 1/' conf/sluice.toml >"$config"
grep -q '^workers = 1' "$config" || { echo "demo.sh: no 'workers = N' line in conf/sluice.toml" >&2; exit 1; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for i in 1 2 3; do
  "$bin/sluice-origin" --listen "127.0.0.1:900$i" --name "app-$i" >/dev/null &
  pids+=($!)
done
echo "demo origins on 127.0.0.1:9001-9003; sluice on http://127.0.0.1:8080 (Ctrl-C to stop)"
"$bin/sluice" run --config "$config"
