#!/usr/bin/env bash
# Builds the Debian package of sluice from a release build:
#   /usr/sbin/sluice, /etc/sluice/sluice.toml (a conffile), /lib/systemd/system/sluice.service,
#   the man pages sluice(8) and sluice.toml(5) generated from `sluice --help` and
#   docs/configuration.md (scripts/gen-man.py), sluice.socket as an example, a sluice system user
#   created in postinst (systemd-sysusers), dependencies from the binary's shared libraries (dpkg-shlibdeps).
# Usage: scripts/package.sh [OUT_DIR]   (BUILD_DIR: the build to package, default build/release)
# PGO=1: the release package, built first with profile-guided optimisation (scripts/build-pgo.sh,
# BUILD_DIR build/pgo; ~10 minutes on 2 cores): the binary bench/run.sh --pgo measures.
# Prints the .deb's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [[ -n ${PGO:-} ]]; then
  export BUILD_DIR=${BUILD_DIR:-build/pgo}
  scripts/build-pgo.sh >&2
fi
build_dir=$(realpath "${BUILD_DIR:-build/release}")
out_dir=$(realpath -m "${1:-$build_dir/package}")
binary=$build_dir/sluice
[[ -x $binary ]] || { echo "package.sh: no $binary; run scripts/build.sh first" >&2; exit 1; }

version=$("$binary" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/pkg
umask 022

install -D -m 0755 "$binary" "$pkg/usr/sbin/sluice"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$pkg/usr/sbin/sluice"
install -D -m 0644 deploy/debian/sluice.toml "$pkg/etc/sluice/sluice.toml"
install -D -m 0644 deploy/systemd/sluice.service "$pkg/lib/systemd/system/sluice.service"
install -D -m 0644 deploy/debian/sysusers.conf "$pkg/usr/lib/sysusers.d/sluice.conf"
doc=$pkg/usr/share/doc/sluice
install -D -m 0644 deploy/debian/copyright "$doc/copyright"
install -D -m 0644 deploy/systemd/sluice.socket "$doc/examples/sluice.socket"
install -D -m 0644 conf/full-example.toml "$doc/examples/full-example.toml"
install -D -m 0644 README.md "$doc/README.md"
for f in configuration operations admin health; do
  install -D -m 0644 "docs/$f.md" "$doc/$f.md"
done
/usr/bin/python3 scripts/gen-man.py "$binary" "$work/man"
install -D -m 0644 "$work/man/sluice.8" "$pkg/usr/share/man/man8/sluice.8"
install -D -m 0644 "$work/man/sluice.toml.5" "$pkg/usr/share/man/man5/sluice.toml.5"
gzip -9n "$pkg/usr/share/man/man8/sluice.8" "$pkg/usr/share/man/man5/sluice.toml.5"
# A native package's changelog: one entry for this version.
cat > "$work/changelog" <<CHANGELOG
sluice ($version) unstable; urgency=medium

  * Package built from the sluice source tree (scripts/package.sh).

 -- sluice maintainers <sluice@example.org>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
CHANGELOG
gzip -9n -c "$work/changelog" > "$doc/changelog.gz"

# dpkg-shlibdeps reads debian/control of a source tree: a minimal one in the work directory.
mkdir -p "$work/src/debian"
printf 'Source: sluice\n\nPackage: sluice\nArchitecture: any\n' > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O "$pkg/usr/sbin/sluice" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$pkg/DEBIAN"
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) \
  > "$pkg/DEBIAN/md5sums"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$pkg/DEBIAN/"
echo /etc/sluice/sluice.toml > "$pkg/DEBIAN/conffiles"
installed_size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: sluice
Version: $version
Architecture: $arch
Maintainer: sluice maintainers <sluice@example.org>
Installed-Size: $installed_size
Depends: systemd, $depends
Section: httpd
Priority: optional
Homepage: https://example.invalid/sluice
Description: L7 HTTP/1.1 reverse-proxy load balancer
 sluice spreads HTTP/1.1 requests over groups of servers (round robin, weighted,
 least connections, consistent hash), with active and passive health checks,
 safe retries, TLS on both sides, hot reload and an admin API. It runs as a
 systemd service (Type=notify, socket activation) and keeps drains and health
 state across restarts.
CONTROL

mkdir -p "$out_dir"
deb=$out_dir/sluice_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
