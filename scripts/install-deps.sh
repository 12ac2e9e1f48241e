#!/usr/bin/env bash
# Installs the Debian 12 packages sluice needs to build, test and benchmark, if any is missing.
# Idempotent and quick when everything is there (no apt-get update in that case).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev openssl libtomlplusplus-dev libspdlog-dev libfmt-dev
  libsystemd-dev  # sd_notify, sd_listen_fds (src/runtime/systemd.cpp, listen_fds.cpp)
  libc-ares-dev  # asynchronous DNS of discovered servers (src/discovery/resolver.cpp)
  python3-dnslib python3-yaml  # the test DNS responder (integration/dns_responder.py), deploy/ manifests' check
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  curl python3 python3-pytest python3-prometheus-client
  systemd  # systemd-analyze verify of deploy/systemd (integration/test_deploy.py)
  dpkg-dev lintian man-db  # scripts/package.sh (dpkg-shlibdeps), its lint and `man -l` in the tests
  chromium chromium-driver python3-selenium  # the dashboard's browser tests (integration/test_dashboard.py)
  libhiredis-dev  # the Redis protocol codec of the idempotency store (src/idempotency/resp.cpp)
  redis-server  # the idempotency store's integration tests (integration/test_idempotency.py)
  clang libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes (scripts/fuzz.sh)
  valgrind  # allocations per request, checked by scripts/test.sh (bench/allocs_per_request.py)
  prometheus  # promtool check rules of deploy/prometheus/alerts.yml (integration/test_prometheus.py)
  wrk  # the load of scripts/pgo_train.py (scripts/build-pgo.sh; its test in integration/test_deploy.py) and of bench/
)
if [[ "${1:-}" == "--bench" ]]; then packages+=(nginx-light haproxy); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
