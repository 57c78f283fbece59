#!/usr/bin/env bash
# image.sh (make image): the container image xmq:VERSION (and xmq:latest)
# for ARCH (default: this machine's), built by buildah from Containerfile
# with the root file system prepared here in $DIST/image: the static xmq
# binary, /etc/passwd and /etc/group with the user xmq (65532), the CA
# certificates, /etc/xmq/xmq.yaml and the licences. No base image is
# pulled. Also saves it as $DIST/xmq_VERSION_image_linux_ARCH.tar
# (docker-archive) and prints its size.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ARCH=${ARCH:-$(go env GOARCH)}
IMAGE=${IMAGE:-xmq}
CA=${CA:-/etc/ssl/certs/ca-certificates.crt}
command -v buildah >/dev/null || { echo "image: buildah is not installed (apt-get install buildah)" >&2; exit 1; }
[[ -f $CA ]] || { echo "image: no CA bundle at $CA (apt-get install ca-certificates)" >&2; exit 1; }

ctx=$DIST/image
root=$ctx/rootfs
rm -rf "$ctx"
mkdir -p "$root/usr/bin" "$root/etc/xmq" "$root/etc/ssl/certs" "$root/usr/share/doc/xmq" "$root/tmp" "$ctx/data"
chmod 1777 "$root/tmp"
gobuild linux "$ARCH" xmq "$root/usr/bin/xmq"
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
xmq:x:65532:65532:xmq MQTT broker:/data:/sbin/nologin
PASSWD
printf 'root:x:0:\nxmq:x:65532:\n' >"$root/etc/group"
cp "$CA" "$root/etc/ssl/certs/ca-certificates.crt"
cp LICENSE "$DIST/share/THIRD_PARTY_LICENSES.txt" "$root/usr/share/doc/xmq/"
# The example configuration, with the container's data directory and the
# dashboard reachable through a published port.
sed -e 's|^data_dir: ./data$|data_dir: /data|' -e 's|^  address: 127.0.0.1:18083$|  address: ":18083"|' \
	xmq.example.yaml >"$root/etc/xmq/xmq.yaml"
if ! grep -q '^data_dir: /data$' "$root/etc/xmq/xmq.yaml" || ! grep -q '^  address: ":18083"$' "$root/etc/xmq/xmq.yaml"; then
	echo "image: xmq.example.yaml no longer has the data_dir and web.address lines this script changes" >&2
	exit 1
fi
find "$ctx" -exec touch -h -d "@$EPOCH" {} +

buildah bud --quiet --format docker --arch "$ARCH" --build-arg VERSION="$VERSION" \
	-t "$IMAGE:$VERSION" -t "$IMAGE:latest" -f Containerfile "$ctx" >/dev/null
archive=$DIST/xmq_${VERSION#v}_image_linux_$ARCH.tar
rm -f "$archive"
buildah push --quiet "$IMAGE:$VERSION" "docker-archive:$archive:$IMAGE:$VERSION" >/dev/null
echo "image: localhost/$IMAGE:$VERSION"
size "$archive"
buildah inspect --format '{{.Docker.Config.User}} {{.Docker.Config.Healthcheck.Test}}' "$IMAGE:$VERSION"
