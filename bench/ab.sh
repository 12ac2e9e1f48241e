#!/usr/bin/env bash
# Interleaved A/B of sluice builds: requests per sluice CPU-second (user + system, from
# /proc/PID/stat), one worker pinned to CPU 1, wrk and one sluice-origin on CPU 0, keep-alive
# `GET /`. For a change whose effect is smaller than the side-by-side run's round-to-round swing
# (bench/run.sh compares proxies; this compares builds of one, in adjacent runs).
#
# Usage: bench/ab.sh ROUNDS SECONDS CONNECTIONS BINARY...
#   CLOSE=1: Connection: close. URLPATH=/?size=1024: another path (default /).
#   KEEPALIVE=N: the upstream's `keepalive` (default 32, the config's default). Below
#   CONNECTIONS the pool still keeps what the load uses (checkouts that found no idle connection
#   raise its bound), so the figure does not depend on it; comparing with a build older than
#   that bound, keep it at or above CONNECTIONS, or the old build's connection churn decides.
# Example: KEEPALIVE=128 bench/ab.sh 3 3 64 /tmp/sluice-before build/release/sluice
# Loopback only; bounded by ROUNDS x binaries x (SECONDS + 1) s of load; ends what it started.
set -euo pipefail
ROUNDS=$1; DUR=$2; CONNS=$3; shift 3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'kill "${SP:-}" "${OP:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
taskset -c 0 "$ROOT/build/release/sluice-origin" --listen 127.0.0.1:0 --name o1 > "$WORK/o1.out" 2>&1 &
OP=$!
for _ in $(seq 50); do grep -q listening "$WORK/o1.out" && break; sleep 0.1; done
OPORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/o1.out" | head -1)
HDR=()
[ -n "${CLOSE:-}" ] && HDR=(-H "Connection: close")
free_port() {
  /usr/bin/python3 -c 'import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError: pass
    finally: s.close()'
}
for r in $(seq "$ROUNDS"); do
  for BIN in "$@"; do
    PORT=$(free_port)
    cat > "$WORK/s.toml" <<T
[server]
listen = ["127.0.0.1:$PORT"]
workers = 1
[log]
level = "warn"
access = "off"
[upstreams.app]
keepalive = ${KEEPALIVE:-32}
[[upstreams.app.servers]]
address = "127.0.0.1:$OPORT"
T
    taskset -c 1 "$BIN" run --config "$WORK/s.toml" > "$WORK/s.out" 2>&1 &
    SP=$!
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
    taskset -c 0 wrk -t1 -c"$CONNS" -d1s "${HDR[@]}" "http://127.0.0.1:$PORT${URLPATH:-/}" > /dev/null
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$SP/stat")
    taskset -c 0 wrk -t1 -c"$CONNS" -d"${DUR}s" "${HDR[@]}" "http://127.0.0.1:$PORT${URLPATH:-/}" > "$WORK/wrk.txt"
    read -r u2 s2 < <(awk '{print $14, $15}' "/proc/$SP/stat")
    REQ=$(awk '/requests in/{print $1}' "$WORK/wrk.txt")
    awk -v r="$r" -v b="$BIN" -v n="$REQ" -v u=$((u2 - u1)) -v s=$((s2 - s1)) 'BEGIN {
      printf "round %d  %-36s %9d requests  user %4d  sys %4d ticks  %8.0f req per CPU-s\n", r, b, n, u, s, n / ((u + s) / 100.0) }'
    kill "$SP"; wait "$SP" 2>/dev/null || true
    SP=
  done
done
