# shellcheck shell=bash
# lib.sh: what the release scripts (release.sh, man.sh, licenses.sh,
# image.sh, deb.sh) share. Sourced, not run.
#
# VERSION, COMMIT, DATE and EPOCH come from git unless set: the tag
# (git describe), the commit, and the commit's time, which stands for the
# build date and every file time so that a build is reproducible (the same
# commit and Go give the same bytes; make release-check verifies it).

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit
: "${VERSION:=$(git describe --tags --always --dirty 2>/dev/null || echo devel)}"
: "${COMMIT:=$(git rev-parse HEAD 2>/dev/null || true)}"
: "${EPOCH:=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}}"
: "${DATE:=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)}"
: "${DIST:=dist}"
: "${PLATFORMS:=linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64}"
export SOURCE_DATE_EPOCH=$EPOCH
# Static binaries: no C library to match on the target.
export CGO_ENABLED=0

# gobuild OS ARCH CMD OUT builds ./cmd/CMD for OS/ARCH into OUT, static,
# without local paths (-trimpath), stamped with the version, stripped of
# the symbol table (-s -w: stack traces keep their names).
gobuild() {
	GOOS=$1 GOARCH=$2 go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.date=$DATE" \
		-o "$4" "./cmd/$3"
}

# sums writes $DIST/SHA256SUMS for every artefact in $DIST.
sums() {
	(cd "$DIST" && shopt -s nullglob && files=(*.tar.gz *.zip *.deb) && sha256sum -- "${files[@]}" >SHA256SUMS)
}

# size prints a file's size in bytes and MiB.
size() {
	local b
	b=$(stat -c %s "$1")
	awk -v n="$(basename "$1")" -v b="$b" 'BEGIN { printf "%-44s %10d B %6.1f MiB\n", n, b, b / 1048576 }'
}
