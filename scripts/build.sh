#!/usr/bin/env bash
# Configures and builds sluice (Release, Ninja and ccache when present) into build/release.
# Usage: scripts/build.sh [extra cmake args...]
# Env:   BUILD_DIR (default build/release); TARGETS (default: all), e.g. "sluice sluice-origin".
# The cmake args apply when the directory is first configured.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a fresh clone (CI) or a worktree reuses what
# another checkout on this machine compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
build_dir=${BUILD_DIR:-build/release}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
fi
targets=()
[[ -z ${TARGETS:-} ]] || read -ra targets <<<"--target $TARGETS"
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
