#!/usr/bin/env bash
# Builds sluice with profile-guided optimisation into build/pgo: an instrumented build, a
# training run on loopback (scripts/pgo_train.py: keep-alive, bodies, new connections, TLS and
# uploads through a real sluice to sluice-origins), then the optimised build from those counts.
# What the package and the benchmarks use (scripts/package.sh with BUILD_DIR=build/pgo,
# bench/run.sh --pgo); docs/performance.md has what it buys.
# Usage: scripts/build-pgo.sh   (BUILD_DIR overrides the directory; FORCE=1 retrains even when
# the tree has not changed since the last training)
# Needs wrk (scripts/install-deps.sh --bench). Loopback only; bounded (about 15 s of load).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build/pgo}
profile=$(realpath -m "$build_dir/pgo-profile")
stamp=$build_dir/pgo-stamp
command -v wrk >/dev/null || { echo "build-pgo.sh: needs wrk (scripts/install-deps.sh --bench)" >&2; exit 1; }

# What the binary is made of, as the files are now (committed or not): the sources, the build
# and the training. A build from the same inputs is kept.
tree=$(find CMakeLists.txt src include scripts/build-pgo.sh scripts/pgo_train.py -type f -print0 |
  sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [[ -z ${FORCE:-} && -x $build_dir/sluice && -f $stamp && $(cat "$stamp") == "$tree" ]]; then
  echo "build-pgo.sh: $build_dir/sluice is up to date (tree $tree)" >&2
  exit 0
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
configure() {
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF \
    -DSLUICE_BUILD_BENCH=OFF -DSLUICE_PGO="$1" -DSLUICE_PGO_DIR="$profile" >/dev/null
}
rm -f "$stamp"
rm -rf "$profile"
configure generate
cmake --build "$build_dir" -j "$(nproc)" --target sluice sluice-origin
/usr/bin/python3 scripts/pgo_train.py "$build_dir"
configure use
# Not from ccache: an object built from other counts must not come back.
CCACHE_DISABLE=1 cmake --build "$build_dir" -j "$(nproc)" --target sluice sluice-origin
echo "$tree" > "$stamp"
echo "build-pgo.sh: $build_dir/sluice built with profile-guided optimisation" >&2
