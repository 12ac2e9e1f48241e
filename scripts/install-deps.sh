#!/usr/bin/env bash
# Installs the Debian 12 packages sluice needs, if any is missing. Idempotent and quick when
# everything is there (no apt-get update in that case).
#
# Usage: scripts/install-deps.sh [--build-only | --bench]
#   (none)        build, run and test everything (scripts/test.sh, CI)
#   --build-only  only what building and running sluice and the test origin needs (scripts/demo.sh)
#   --bench       everything, plus the peers and tools of bench/run.sh and bench/abuse.sh
set -euo pipefail

mode=${1:-}
case "$mode" in
  "" | --build-only | --bench) ;;
  *) echo "usage: $0 [--build-only | --bench]" >&2; exit 2 ;;
esac

# Each package once, in the first group that needs it; a mode installs its group and those above.
# build: compile and run `sluice` and `sluice-origin` (and curl, to ask them something).
build=(
  g++ cmake ninja-build ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libsystemd-dev  # sd_notify, sd_listen_fds (src/runtime/systemd.cpp, listen_fds.cpp)
  libc-ares-dev  # asynchronous DNS of discovered servers (src/discovery/resolver.cpp)
  libhiredis-dev  # the Redis protocol codec of the idempotency store (src/idempotency/resp.cpp)
  zlib1g-dev libzstd-dev libbrotli-dev  # response compression (src/compress): gzip, zstd, br
  libnghttp2-dev  # HTTP/2 to clients (src/proxy/h2_session.cpp): framing, HPACK, flow control
  curl
)
# test: the unit tests, integration tests, sanitizer and fuzz builds, packaging (scripts/test.sh).
test=(
  build-essential openssl
  python3-dnslib python3-yaml  # the test DNS responder (integration/dns_responder.py), deploy/ manifests' check
  python3-zstandard python3-brotli  # decoding compressed answers (integration/test_compression.py)
  pebble  # the test ACME CA (integration/test_acme.py)
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  python3 python3-pytest python3-prometheus-client
  systemd  # systemd-analyze verify of deploy/systemd (integration/test_deploy.py)
  # the Debian root that integration/test_systemd_units.py boots with systemd-nspawn
  # (scripts/systemd-root.sh)
  debootstrap systemd-container
  dpkg-dev lintian man-db  # scripts/package.sh (dpkg-shlibdeps), its lint and `man -l` in the tests
  chromium chromium-driver python3-selenium  # the dashboard's browser tests (integration/test_dashboard.py)
  nghttp2-client python3-h2 python3-hyperframe  # HTTP/2 clients and hand-made frames (integration/test_http2.py)
  python3-grpcio  # gRPC clients and servers (integration/test_grpc.py)
  redis-server  # the idempotency store's integration tests (integration/test_idempotency.py)
  redis-tools  # redis-cli, a lease set by hand in integration/test_acme_fleet.py
  clang libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes (scripts/fuzz.sh)
  valgrind  # allocations per request, checked by scripts/test.sh (bench/allocs_per_request.py)
  prometheus  # promtool check rules of deploy/prometheus/alerts.yml (integration/test_prometheus.py)
  wrk  # the load of scripts/pgo_train.py (scripts/build-pgo.sh; its test in integration/test_deploy.py) and of bench/
)
# bench: the side-by-side peers (bench/run.sh, bench/abuse.sh).
bench=(
  nginx-light haproxy
  slowhttptest  # the slow-read ramp of bench/abuse.sh
)

packages=("${build[@]}")
[[ $mode == --build-only ]] || packages+=("${test[@]}")
[[ $mode != --bench ]] || packages+=("${bench[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # unsafe-io: dpkg skips its fsync before each renamed file (what Debian's container images
  # do); unpacking Boost's 15,000 headers otherwise takes a minute on a virtual disk.
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
fi
