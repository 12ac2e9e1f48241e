#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build/fuzz and runs each one: first the
# checked-in inputs once (fuzz/corpus/<t>, fuzz/regressions/<t>), then fuzzing for a bounded time.
# Any crash, sanitizer report, timeout or broken invariant fails the script and leaves the input in
# build/fuzz/artifacts/<t>/. See docs/fuzzing.md.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default: 30 s, every target; 0: replay;
#        build: only build the targets)
# Env:   SLUICE_FUZZ_SEED (default 1), BUILD_DIR (default build/fuzz), FUZZ_JOBS (default 1:
#        parallel fuzzing processes per target, each with its own seed; for long runs),
#        FUZZ_TARGETS_AT_ONCE (default: the number of cores; targets fuzzed side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(request response config chunked head_request head_response h2)
build_dir=${BUILD_DIR:-build/fuzz}
# As scripts/build.sh: ccache keys on paths relative to the checkout, so that a fresh clone's
# fuzz build hits what another checkout compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
seed=${SLUICE_FUZZ_SEED:-1}
jobs=${FUZZ_JOBS:-1}
at_once=${FUZZ_TARGETS_AT_ONCE:-$(nproc)}

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
[[ $seconds != build ]] || exit 0

# Leaks are real bugs here too; a slow input (> 10 s) counts as a hang.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# One target: its checked-in inputs replayed, then fuzzed; what it prints goes to its own file.
fuzz_one() {
  local t=$1
  dict=fuzz/http.dict
  max_len=16384
  [[ $t == config ]] && dict=fuzz/toml.dict && max_len=8192
  [[ $t == h2 ]] && dict=fuzz/h2.dict
  bin="$build_dir/fuzz_$t"
  artifacts="$build_dir/artifacts/$t/"
  work="$build_dir/corpus/$t"  # the fuzzer's additions go here, never into the checked-in seeds
  mkdir -p "$artifacts" "$work"
  # The head index targets start from the request and response seeds (same input formats).
  seeds=()
  seed_dirs=("$t")
  [[ $t == head_* ]] && seed_dirs+=("${t#head_}")
  for s in "${seed_dirs[@]}"; do
    [[ -d fuzz/corpus/$s ]] && seeds+=(fuzz/corpus/"$s")
    [[ -d fuzz/regressions/$s ]] && seeds+=(fuzz/regressions/"$s")
  done

  echo "== fuzz_$t: replaying $(find "${seeds[@]}" -type f | wc -l) checked-in inputs"
  mapfile -t inputs < <(find "${seeds[@]}" -type f | sort)
  if ! "$bin" "${inputs[@]}" >"$build_dir/replay-$t.log" 2>&1; then
    tail -40 "$build_dir/replay-$t.log"
    echo "fuzz_$t: a checked-in input fails" >&2
    return 1
  fi

  ((seconds > 0)) || return 0  # 0: replay only (libFuzzer would take 0 as "no limit")
  echo "== fuzz_$t: fuzzing for ${seconds}s (seed $seed, $jobs job(s))"
  fuzz_args=(-max_total_time="$seconds" -seed="$seed" -dict="$dict" -max_len="$max_len" -timeout=10
             -rss_limit_mb=2048 -artifact_prefix="$artifacts" -print_final_stats=1 -print_pcs=0)
  if ((jobs > 1)); then fuzz_args+=(-fork="$jobs" -ignore_crashes=0); fi
  if ! "$bin" "${fuzz_args[@]}" "$work" "${seeds[@]}" >"$build_dir/fuzz-$t.log" 2>&1; then
    tail -60 "$build_dir/fuzz-$t.log"
    echo "fuzz_$t FAILED: reproduce with $bin $artifacts<file>; see docs/fuzzing.md" >&2
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|cov: .*ft:" "$build_dir/fuzz-$t.log" | tail -3
}

# Targets run side by side, each printing its report when it ends, in the order they end.
status=0
running=0
for t in "${targets[@]}"; do
  if ((running >= at_once)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  (
    rc=0
    fuzz_one "$t" >"$build_dir/report-$t.log" 2>&1 || rc=$?
    cat "$build_dir/report-$t.log"
    exit "$rc"
  ) &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit "$status"
