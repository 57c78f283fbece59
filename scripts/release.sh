#!/usr/bin/env bash
# release.sh (make release): xmq and loadtest for every platform in
# PLATFORMS, static (CGO_ENABLED=0), -trimpath, stamped with VERSION, each
# pair in an archive with LICENSE, README.md, xmq.example.yaml, the
# third-party notices and (except on Windows) the man pages and shell
# completions: $DIST/xmq_<version>_<os>_<arch>.tar.gz (.zip for Windows),
# and $DIST/SHA256SUMS. Reproducible: file times are the commit's, entries
# sorted and owned by root (scripts/archive), so the same commit and Go
# give the same bytes (make release-check builds twice and compares).
# Needs make licenses and make man first (the Makefile runs them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

share=$DIST/share
for f in "$share/THIRD_PARTY_LICENSES.txt" "$share/man/xmq.1" "$share/completion/xmq.bash"; do
	[[ -f $f ]] || { echo "release: $f is missing (make licenses man)" >&2; exit 1; }
done
stage=$DIST/.stage
rm -rf "$stage" "$DIST"/xmq_*.tar.gz "$DIST"/xmq_*.zip
mkdir -p "$stage"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/archive" ./scripts/archive

for p in $PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	name=xmq_${VERSION#v}_${os}_${arch}
	dir=$stage/$name
	mkdir -p "$dir"
	exe=
	[[ $os == windows ]] && exe=.exe
	for cmd in xmq loadtest; do
		gobuild "$os" "$arch" "$cmd" "$dir/$cmd$exe"
	done
	cp LICENSE README.md xmq.example.yaml "$share/THIRD_PARTY_LICENSES.txt" "$dir/"
	if [[ $os == windows ]]; then
		"$tmp/archive" -mtime "$EPOCH" -o "$DIST/$name.zip" -C "$stage" "$name"
	else
		cp -r "$share/man" "$share/completion" "$dir/"
		"$tmp/archive" -mtime "$EPOCH" -o "$DIST/$name.tar.gz" -C "$stage" "$name"
	fi
	echo "release: $name"
done
rm -rf "$stage"
sums
echo "release: $VERSION ($COMMIT, $DATE) in $DIST:"
# Only Windows builds make a .zip: a glob that matches nothing is no file.
shopt -s nullglob
for f in "$DIST"/xmq_*.tar.gz "$DIST"/xmq_*.zip; do size "$f"; done
