#!/usr/bin/env bash
# licenses.sh (make licenses): the licences of everything linked into xmq
# and loadtest, found by github.com/google/go-licenses in the module cache.
# Prints one line per package with its licence, fails when a licence is not
# one Apache-2.0 code may ship in a binary (ALLOWED), and writes
# $DIST/share/THIRD_PARTY_LICENSES.txt, the notices the release archives,
# the image and the Debian package carry (Go's own licence included: the
# standard library is linked too).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

GO_LICENSES=${GO_LICENSES:-github.com/google/go-licenses@v1.6.0}
ALLOWED=${ALLOWED:-Apache-2.0,BSD-2-Clause,BSD-3-Clause,MIT,ISC}
out=$DIST/share
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tools=$(realpath -m "$DIST/.tools")
GOBIN=$tools GOFLAGS='' go install "$GO_LICENSES"
self=$(go list -m)
pkgs=(./cmd/xmq ./cmd/loadtest)

# go-licenses looks for each module's source URL on the network and warns
# when it cannot; only the licence names and texts matter here.
run() { "$tools/go-licenses" "$@" 2>>"$tmp/log"; }

cat >"$tmp/list.tpl" <<'TPL'
{{range .}}{{.Name}} {{.LicenseName}}
{{end}}
TPL
cat >"$tmp/notices.tpl" <<'TPL'
{{range .}}
================================================================================
{{.Name}} ({{.LicenseName}})
================================================================================

{{.LicenseText}}
{{end}}
TPL
if ! run report --ignore "$self" --template "$tmp/list.tpl" "${pkgs[@]}" >"$tmp/list" ||
	! run check --ignore "$self" --allowed_licenses "$ALLOWED" "${pkgs[@]}"; then
	grep -v 'Error discovering license URL' "$tmp/log" >&2 || true
	echo "licenses: a dependency's licence is unknown or not one of $ALLOWED" >&2
	exit 1
fi
sort -u "$tmp/list" | awk 'NF { printf "  %-72s %s\n", $1, $2 }'
echo "licences: $(awk '{ print $2 }' "$tmp/list" | grep . | sort | uniq -c | awk '{ printf "%s%s %s", sep, $2, $1; sep = ", " }')"

{
	echo "xmq and loadtest include the following software, under these licences."
	echo
	echo "================================================================================"
	echo "Go standard library and runtime (BSD-3-Clause)"
	echo "================================================================================"
	echo
	cat "$(go env GOROOT)/LICENSE"
	run report --ignore "$self" --template "$tmp/notices.tpl" "${pkgs[@]}"
} >"$out/THIRD_PARTY_LICENSES.txt"
echo "wrote $out/THIRD_PARTY_LICENSES.txt ($(wc -c <"$out/THIRD_PARTY_LICENSES.txt") bytes)"
