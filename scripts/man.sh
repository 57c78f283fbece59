#!/usr/bin/env bash
# man.sh (make man): the man pages xmq(1), xmq.yaml(5) and loadtest(1) in
# $DIST/share/man, made by scripts/genman from the text the commands print
# for -h (and their subcommands' -h) and from xmq.example.yaml's comments,
# so they say what the help says. Also the shell completion scripts, in
# $DIST/share/completion.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out=$DIST/share
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out/man" "$out/completion"
mkdir -p "$out/man" "$out/completion"
CGO_ENABLED=0 go build -o "$tmp/xmq" ./cmd/xmq
CGO_ENABLED=0 go build -o "$tmp/loadtest" ./cmd/loadtest
go build -o "$tmp/genman" ./scripts/genman

day=$(date -u -d "@$EPOCH" +%Y-%m-%d)
gen() { "$tmp/genman" -date "$day" -version "$VERSION" "$@"; }

x=$tmp/xmq
"$x" -h >"$tmp/xmq.txt"
subs=()
for cmd in certs passwd "store check" config health completion; do
	f=$tmp/${cmd// /-}.txt
	# shellcheck disable=SC2086 # "store check" is two words
	"$x" $cmd -h >"$f"
	subs+=("xmq $cmd=$f")
done
gen -name xmq -section 1 -title "MQTT 3.1, 3.1.1 and 5.0 broker" -see "xmq.yaml(5),loadtest(1)" \
	"${subs[@]}" <"$tmp/xmq.txt" >"$out/man/xmq.1"

"$x" config env >"$tmp/vars.txt"
# The environment rule, as xmq config -h states it.
awk '/^Environment:/ { on = 1; next } on' "$tmp/config.txt" >"$tmp/env.txt"
gen -name xmq.yaml -section 5 -title "xmq configuration file" -yaml xmq.example.yaml -vars "$tmp/vars.txt" \
	-see "xmq(1)" "Environment=$tmp/env.txt" >"$out/man/xmq.yaml.5"

"$tmp/loadtest" -h >"$tmp/loadtest.txt" 2>&1
gen -name loadtest -section 1 -title "load generator for MQTT brokers" -see "xmq(1)" <"$tmp/loadtest.txt" >"$out/man/loadtest.1"

# groff, when there, checks the pages parse without a warning.
if command -v groff >/dev/null; then
	warnings=$(groff -man -ww -z "$out"/man/* 2>&1)
	[[ -z $warnings ]] || { echo "man: groff warns:" >&2; echo "$warnings" >&2; exit 1; }
fi

"$x" completion bash >"$out/completion/xmq.bash"
"$x" completion zsh >"$out/completion/_xmq"
"$x" completion fish >"$out/completion/xmq.fish"
ls -l "$out/man" "$out/completion"
