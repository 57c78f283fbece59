#!/usr/bin/env bash
# bench-cluster.sh — one measurement of a 3-node cluster on this machine,
# the nodes pinned to CPU 0 and the load generator to CPU 1 (docs/cluster.md,
# "What the secret and TLS cost"). Prints the nodes' CPU time over the run
# and loadtest's result row.
#
#   scripts/bench-cluster.sh pubsub       cross-node pubsub: 10 × 100 msg/s QoS 1 on n1, 10 subscribers on n2, 10 s
#   scripts/bench-cluster.sh storm        15,000 connections over the three nodes at once
#   SECURE=secret|tls|none                a cluster secret (default), a secret and TLS routes, or neither
#   XMQ=/path/to/xmq                      another build of xmq (e.g. an older commit's; SECURE=none for one without secrets)
#   BASE=41883                            first MQTT port (nodes BASE..BASE+2, routes BASE+300.., NATS clients BASE+200..)
set -euo pipefail
cd "$(dirname "$0")/.."
TEST=${1:-pubsub}
SECURE=${SECURE:-secret}
BASE=${BASE:-41883}
GO=${GO:-go}
mkdir -p bin
$GO build -o bin/loadtest ./cmd/loadtest
if [[ -z ${XMQ:-} ]]; then
	$GO build -o bin/xmq ./cmd/xmq
	XMQ=bin/xmq
fi
D=$(mktemp -d)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$D"' EXIT
secret=$(head -c 24 /dev/urandom | base64)
for i in 0 1 2; do
	n=n$((i + 1))
	mkdir -p "$D/$n"
	routes=()
	for j in 0 1 2; do ((j == i)) || routes+=("127.0.0.1:$((BASE + 300 + j))"); done
	sec="" tls=""
	[[ $SECURE == none ]] || sec="  secret: \"$secret\""
	if [[ $SECURE == tls ]]; then
		"$XMQ" certs -data "$D" -node "$n" >/dev/null
		tls="      tls: {cert_file: $D/certs/node-$n.pem, key_file: $D/certs/node-$n-key.pem, ca_file: $D/certs/ca.pem}"
	fi
	cat >"$D/$n/xmq.yaml" <<YAML
listeners:
  - {name: mqtt, transport: tcp, address: "127.0.0.1:$((BASE + i))"}
cluster:
  enabled: true
  node: $n
$sec
  nats:
    embedded:
      listen: 127.0.0.1:$((BASE + 300 + i))
      client_listen: 127.0.0.1:$((BASE + 200 + i))
      routes: [$(IFS=,; echo "${routes[*]}")]
$tls
YAML
	taskset -c 0 "$XMQ" -c "$D/$n/xmq.yaml" -data "$D/$n" -web "" 2>"$D/$n/log" &
	pids+=($!)
	disown # killed at the end without a word from bash
done
for i in 0 1 2; do
	for _ in $(seq 150); do
		grep -q "cluster state ready" "$D/n$((i + 1))/log" && break
		kill -0 "${pids[$i]}" 2>/dev/null || { tail -2 "$D/n$((i + 1))/log" >&2; exit 1; }
		sleep 0.2
	done
done
sleep 1
cpu() { # the nodes' user+system clock ticks
	local t=0 p f
	for p in "${pids[@]}"; do
		read -r -a f <"/proc/$p/stat"
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}
c0=$(cpu)
if [[ $TEST == pubsub ]]; then
	taskset -c 1 bin/loadtest -mqtt 3.1.1 -addr "127.0.0.1:$BASE" -sub-addr "127.0.0.1:$((BASE + 1))" -mode pubsub -subs 10 -pubs 10 -rate 100 \
		-qos 1 -payload 64 -duration 10s >"$D/lt.txt" 2>&1 || true
else
	taskset -c 1 bin/loadtest -mqtt 3.1.1 -addr "127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))" -mode conn -levels 15000 \
		-hold 2s -dial-concurrency 200 >"$D/lt.txt" 2>&1 || true
fi
c1=$(cpu)
echo "$TEST, SECURE=$SECURE: the nodes used $(((c1 - c0) * 1000 / $(getconf CLK_TCK))) ms of CPU"
# loadtest's table: its header and result row, its notes
sed -n '/^condition\|^target/,$p' "$D/lt.txt"
