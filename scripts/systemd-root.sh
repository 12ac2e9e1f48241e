#!/usr/bin/env bash
# Makes, once, the Debian 12 root that integration/test_systemd_units.py boots with
# `systemd-nspawn -b` to run deploy/systemd/ under a real systemd: debootstrap's minbase plus
# systemd as init. The root is cached in /var/cache/sluice/systemd-root/bookworm (SLUICE_CACHE
# overrides /var/cache/sluice) and never modified afterwards: the test boots it with a throwaway
# overlay on top (--volatile=overlay). Making it downloads ~60 MB from the Debian mirror and takes
# a few minutes; scripts/test.sh starts this script in the background at its beginning, so that
# the root is ready when the integration tests get to it. Concurrent runs wait for each other
# (flock). Prints the root's path on its last line. Needs root, debootstrap and systemd-nspawn
# (scripts/install-deps.sh).
set -euo pipefail
cache=${SLUICE_CACHE:-/var/cache/sluice}/systemd-root
root=$cache/bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
# The marker is written last: a root whose making was interrupted is made again.
if [[ ! -e $root/.sluice-root-complete ]]; then
  rm -rf "$root" "$root.tmp"
  # systemd-sysv makes systemd the init that `systemd-nspawn -b` boots; minbase has no init.
  debootstrap --variant=minbase --include=systemd,systemd-sysv bookworm "$root.tmp" "$mirror" >&2
  # Nothing in the root asks for the network or a login: no getty on the console, no apt timers.
  rm -f "$root.tmp/etc/systemd/system/getty.target.wants/"* \
    "$root.tmp/etc/systemd/system/timers.target.wants/"*
  echo sluice-test > "$root.tmp/etc/hostname"
  rm -rf "$root.tmp/var/cache/apt/archives/"*.deb
  touch "$root.tmp/.sluice-root-complete"
  mv "$root.tmp" "$root"
fi
echo "$root"
