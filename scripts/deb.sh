#!/usr/bin/env bash
# deb.sh (make deb): the Debian package $DIST/xmq_VERSION_ARCH.deb, built
# with dpkg-deb from a tree made here: /usr/bin/xmq and /usr/bin/loadtest,
# /etc/xmq/xmq.yaml (the example with data_dir /var/lib/xmq) and
# /etc/default/xmq as conffiles, /var/lib/xmq, the hardened systemd unit
# (packaging/xmq.service), the maintainer scripts (packaging/deb: user
# xmq, enable and start the service where systemd runs), the man pages,
# the shell completions and the licences. ARCH defaults to this machine's
# (Go's amd64 and arm64 are Debian's names too).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ARCH=${ARCH:-$(go env GOARCH)}
MAINTAINER=${MAINTAINER:-xmq maintainers <xmq-io@users.noreply.github.com>}
command -v dpkg-deb >/dev/null || { echo "deb: dpkg-deb is not installed" >&2; exit 1; }
for f in "$DIST/share/THIRD_PARTY_LICENSES.txt" "$DIST/share/man/xmq.1"; do
	[[ -f $f ]] || { echo "deb: $f is missing (make licenses man)" >&2; exit 1; }
done

# Debian versions start with a digit and keep '-' for the package
# revision: v0.1.0 is 0.1.0, v0.1.0-3-gabc1234-dirty 0.1.0+3.gabc1234.dirty,
# an untagged abc1234 0.0.0+git.abc1234.
v=${VERSION#v}
[[ $v =~ ^[0-9]+\.[0-9]+ ]] || v=0.0.0-git-$v
if [[ $v == *-* ]]; then
	v=${v/-/+}
	v=${v//-/.}
fi
debver=$v
root=$DIST/deb/xmq_${debver}_$ARCH
rm -rf "$DIST/deb"
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/etc/xmq" "$root/etc/default" "$root/lib/systemd/system" \
	"$root/var/lib/xmq" "$root/usr/share/man/man1" "$root/usr/share/man/man5" "$root/usr/share/doc/xmq" \
	"$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
	"$root/usr/share/fish/vendor_completions.d" "$root/usr/share/lintian/overrides"

gobuild linux "$ARCH" xmq "$root/usr/bin/xmq"
gobuild linux "$ARCH" loadtest "$root/usr/bin/loadtest"
sed 's|^data_dir: ./data$|data_dir: /var/lib/xmq|' xmq.example.yaml >"$root/etc/xmq/xmq.yaml"
grep -q '^data_dir: /var/lib/xmq$' "$root/etc/xmq/xmq.yaml" ||
	{ echo "deb: xmq.example.yaml no longer has the data_dir line this script changes" >&2; exit 1; }
cp packaging/deb/default "$root/etc/default/xmq"
cp packaging/xmq.service "$root/lib/systemd/system/xmq.service"
for page in "$DIST"/share/man/*.[15]; do
	gzip -9n <"$page" >"$root/usr/share/man/man${page##*.}/$(basename "$page").gz"
done
cp "$DIST/share/completion/xmq.bash" "$root/usr/share/bash-completion/completions/xmq"
cp "$DIST/share/completion/_xmq" "$root/usr/share/zsh/vendor-completions/_xmq"
cp "$DIST/share/completion/xmq.fish" "$root/usr/share/fish/vendor_completions.d/xmq.fish"
cp xmq.example.yaml "$root/usr/share/doc/xmq/"
gzip -9n <README.md >"$root/usr/share/doc/xmq/README.md.gz"
# Machine-readable (DEP 5), pointing at Debian's copy of the Apache
# licence; the notices of the linked modules, many under Apache 2.0 too,
# are a file of their own.
cat >"$root/usr/share/doc/xmq/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: xmq
Source: https://github.com/xmq-io/xmq

Files: *
Copyright: $(date -u -d "@$EPOCH" +%Y) The xmq authors
License: Apache-2.0
Comment: The Go modules linked into /usr/bin/xmq and /usr/bin/loadtest are
 under their own licences, listed with their notices in
 /usr/share/doc/xmq/THIRD_PARTY_LICENSES.txt.gz.

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may
 not use this file except in compliance with the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 can
 be found in the file /usr/share/common-licenses/Apache-2.0.
COPYRIGHT
gzip -9n <"$DIST/share/THIRD_PARTY_LICENSES.txt" >"$root/usr/share/doc/xmq/THIRD_PARTY_LICENSES.txt.gz"
# A native package's changelog: one entry for this build.
{
	echo "xmq ($debver) unstable; urgency=medium"
	echo
	echo "  * Built from commit ${COMMIT:0:12}."
	echo
	echo " -- $MAINTAINER  $(LC_ALL=C date -u -R -d "@$EPOCH")"
} | gzip -9n >"$root/usr/share/doc/xmq/changelog.gz"
# Go links statically by design (CGO_ENABLED=0): no shared library to
# depend on, the same binary on every Debian release.
cat >"$root/usr/share/lintian/overrides/xmq" <<OVERRIDES
xmq: statically-linked-binary [usr/bin/xmq]
xmq: statically-linked-binary [usr/bin/loadtest]
OVERRIDES

cp packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
printf '/etc/xmq/xmq.yaml\n/etc/default/xmq\n' >"$root/DEBIAN/conffiles"
(cd "$root" && find usr lib -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
cat >"$root/DEBIAN/control" <<CONTROL
Package: xmq
Version: $debver
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: passwd, init-system-helpers (>= 1.54~)
Section: net
Priority: optional
Description: MQTT 3.1, 3.1.1 and 5.0 broker
 xmq serves MQTT over TCP, TLS, WebSocket, WebSocket over TLS and QUIC,
 keeps persistent sessions and retained messages in an embedded store,
 and has a web dashboard, a REST API and Prometheus metrics.
 .
 This package runs it as the systemd service xmq, as the user xmq, with
 its configuration in /etc/xmq/xmq.yaml and /etc/default/xmq and its
 state in /var/lib/xmq. It includes loadtest, xmq's load generator.
CONTROL

# Modes and times independent of this machine's umask and clock.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +
chmod 0755 "$root/usr/bin/xmq" "$root/usr/bin/loadtest" "$root"/DEBIAN/{postinst,prerm,postrm}
find "$root" -exec touch -h -d "@$EPOCH" {} +
deb=$DIST/xmq_${debver}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
rm -rf "$DIST/deb"
sums
dpkg-deb --info "$deb" | sed -n 's/^ *\(Package\|Version\|Architecture\|Installed-Size\):/deb: &/p'
size "$deb"
