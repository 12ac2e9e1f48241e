#!/usr/bin/env bash
# Measures the first run as a new user meets it: a fresh Debian 12 root (debootstrap), a commit of
# this checkout copied into it, scripts/demo.sh started there (chroot: packages, a cold ccache,
# the build), and the time until `curl localhost:8080/` first answers. Then asks six more times
# (the answers should go round app-1, app-2, app-3), stops the demo and removes the root.
#
# Usage: sudo scripts/measure-first-run.sh [REV]      (default HEAD; the committed tree is copied)
# Env:   ROOT     where the fresh root is made (default /var/tmp/sluice-first-run; removed after)
#        BASE     an untouched debootstrapped bookworm root to copy instead of running
#                 debootstrap (neither is part of the measured time)
#        KEEP=1   keep ROOT afterwards;  TIMEOUT  seconds to wait for the answer (default 1800)
# The root shares this machine's network: ports 8080, 9001-9003 and 9901 must be free. The demo's
# log, each line stamped with the seconds since the start, is ROOT.log.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
root=${ROOT:-/var/tmp/sluice-first-run}
timeout=${TIMEOUT:-1800}
log=$root.log
[[ $(id -u) -eq 0 ]] || { echo "measure-first-run.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
[[ ! -e $root ]] || { echo "measure-first-run.sh: $root exists; remove it first" >&2; exit 2; }
for port in 8080 9001 9002 9003 9901; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "measure-first-run.sh: 127.0.0.1:$port is in use" >&2
    exit 2
  fi
done
commit=$(git rev-parse --short "$rev")

mounted=()
demo_pid=""
cleanup() {
  if [[ -n $demo_pid ]]; then
    kill -TERM -- "-$demo_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 -- "-$demo_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$demo_pid" 2>/dev/null || true
  fi
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done
  rm -f "$root.fifo"
  if [[ ${KEEP:-0} != 1 && -d $root ]]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

if [[ -n ${BASE:-} ]]; then
  cp -a "$BASE" "$root"
else
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  debootstrap bookworm "$root" http://deb.debian.org/debian >"$root.debootstrap.log"
fi
# What a Debian 12 installation's sources are: the release, its updates and security.
cat >"$root/etc/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/src/sluice"
git archive "$rev" | tar -x -C "$root/src/sluice"
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done

echo "first run of $commit in $root (log: $log)"
ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
start=$(ms)
stamp() { while IFS= read -r line; do printf '%6d %s\n' $((($(ms) - start) / 1000)) "$line"; done; }
fifo=$root.fifo
rm -f "$fifo"
mkfifo "$fifo"
stamp <"$fifo" >"$log" &
# Its own session: the demo, its build and its servers are one process group, stopped together.
setsid chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  TERM=dumb /bin/bash -c 'cd /src/sluice && exec scripts/demo.sh' >"$fifo" 2>&1 </dev/null &
demo_pid=$!

answer=""
deadline=$(( $(date +%s) + timeout ))
while (( $(date +%s) < deadline )); do
  if answer=$(curl -sf -m 2 http://127.0.0.1:8080/ 2>/dev/null); then break; fi
  answer=""
  kill -0 "$demo_pid" 2>/dev/null || break
  sleep 0.5
done
elapsed_ms=$(($(ms) - start))
# CPU time of what the demo has finished by now (packages and build: its waited-for children),
# the figure that does not depend on what else this machine runs.
read -ra stat <"/proc/$demo_pid/stat" || stat=()
cpu_ticks=$(( ${stat[15]:-0} + ${stat[16]:-0} ))
if [[ -z $answer ]]; then
  tail -30 "$log"
  echo "measure-first-run.sh: no answer within $timeout s (or the demo exited)" >&2
  exit 1
fi
answers=("$answer")
for _ in 1 2 3 4 5 6; do answers+=("$(curl -sf -m 2 http://127.0.0.1:8080/ || echo error)"); done

# The phases, from the stamped log.
phase() { grep -m1 -E "$2" "$log" | awk -v n="$1" '{printf "  %-22s at %4d s\n", n, $1}' || true; }
phase "packages: installing" "installing:"
phase "build: configure" "The CXX compiler identification"
phase "build: first unit" "\[1/[0-9]+\]"
phase "build: linked sluice" "Linking CXX executable sluice$"
phase "demo started" "demo origins on"
printf 'first answer after %d.%d s (%s), %d CPU-seconds of packages and build, load average %s;\n' \
  $((elapsed_ms / 1000)) $((elapsed_ms % 1000 / 100)) "$commit" $((cpu_ticks / $(getconf CLK_TCK))) \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
echo "answers in order: ${answers[*]}"
