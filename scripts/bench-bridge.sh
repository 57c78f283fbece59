#!/usr/bin/env bash
# bench-bridge.sh — one bridge's throughput and added latency: xmq bridged
# to Mosquitto, xmq bridged to xmq, and Mosquitto bridged to Mosquitto, in
# the same run. Both brokers of a pair share CPU 0, the load generator
# (cmd/loadtest) runs on CPU 1; publishers connect to the bridging broker
# A (127.0.0.1:21883), subscribers to the remote B (127.0.0.1:21884)
# through loadtest's -sub-addr.
#
#   throughput  4 publishers as fast as they can for DUR, QoS 0 and 1, 64 B,
#               one subscriber at B: delivered/s. A's queue is unbounded
#               (max_queued), so nothing is dropped: the figure is what the
#               bridge forwards (or what B takes, when B is the slower).
#   latency     10 publishers at 100 msg/s (1,000 msg/s), QoS 1, 64 B, one
#               subscriber at B: p50/p99 end to end through the bridge, and
#               the same with the publishers on B itself (no bridge), so the
#               difference is what the bridge adds.
#
# Setups alternate over RUNS rounds, so that the noise of a shared machine
# spreads over all of them. Prints one line per setup, case and run.
#
#   scripts/bench-bridge.sh                 RUNS=3 DUR=3s
#   SETUPS="xmq-xmq" RUNS=1 scripts/bench-bridge.sh
#
# Needs: go, python3, taskset, mosquitto (/usr/sbin), 2 CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DUR=${DUR:-3s}
SETUPS=${SETUPS:-"xmq-mosquitto xmq-xmq mosquitto-mosquitto"}
WORK=${WORK:-$(mktemp -d /tmp/bench-bridge.XXXXXX)}
A=127.0.0.1:21883
B=127.0.0.1:21884
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)

go build -o "$WORK/xmq" ./cmd/xmq
go build -o "$WORK/loadtest" ./cmd/loadtest

pids=()
stop_all() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
trap stop_all EXIT

# shellcheck source=scripts/benchlib.sh
. scripts/benchlib.sh

# start_xmq ADDR [bridge]: xmq on CPU 0, state in memory (as Mosquitto's),
# queues unbounded; "bridge" adds a bridge to B for loadtest/#.
start_xmq() {
	local conf="$WORK/xmq-${1##*:}.yaml"
	printf 'broker:\n  max_queued: 100000000\n' >"$conf"
	if [ "${2:-}" = bridge ]; then
		printf 'bridges:\n  - {name: b, addresses: [mqtt://%s], protocol: "5", topics: [{topic: "loadtest/#", qos: 2}]}\n' "$B" >>"$conf"
	fi
	taskset -c 0 "$WORK/xmq" -c "$conf" -listen "$1" -data "" -web "" -log-level warn >"$WORK/xmq-${1##*:}.log" 2>&1 &
	pids+=($!)
	wait_port "$1"
}

# start_mosquitto ADDR [bridge]: Mosquitto on CPU 0, Nagle off as every Go
# broker has it, queues unbounded; "bridge" adds a connection to B.
start_mosquitto() {
	local conf="$WORK/mosquitto-${1##*:}.conf"
	printf 'listener %s %s\nallow_anonymous true\nset_tcp_nodelay true\nmax_queued_messages 0\n' "${1##*:}" "${1%:*}" >"$conf"
	if [ "${2:-}" = bridge ]; then
		printf 'connection b\naddress %s\ntopic loadtest/# out 2\nbridge_protocol_version mqttv50\ncleansession true\n' "$B" >>"$conf"
	fi
	[ "$(id -u)" = 0 ] && echo "user root" >>"$conf"
	taskset -c 0 "$MOSQUITTO" -c "$conf" >"$WORK/mosquitto-${1##*:}.log" 2>&1 &
	pids+=($!)
	wait_port "$1"
}

# measure SETUP RUN CASE ARGS...: one loadtest case; prints its figures.
measure() {
	local setup=$1 run=$2 name=$3
	shift 3
	taskset -c 1 "$WORK/loadtest" -mqtt 3.1.1 -payload 64 -progress=false -json "$@" >"$WORK/res-$setup-$name-$run.json" 2>/dev/null || true
	python3 - "$WORK/res-$setup-$name-$run.json" "$setup" "$run" "$name" <<'PY'
import json, sys
path, setup, run, name = sys.argv[1:]
try:
    c = json.load(open(path))["cases"][0]
except Exception as e:
    print(f"{setup:20} run {run}  {name:16} failed: {e}")
    sys.exit()
l = c.get("latency_summary") or {}
ms = lambda k: l.get(k, 0) / 1e6
print(f"{setup:20} run {run}  {name:16} published/s {c['published_per_s']:>9,.0f}  delivered/s {c['delivered_per_s']:>9,.0f}"
      f"  p50 {ms('p50_ns'):7.2f} ms  p99 {ms('p99_ns'):7.2f} ms  lost {c['lost']}  dup {c['duplicates']}")
PY
}

for run in $(seq "$RUNS"); do
	set -- $SETUPS
	# Alternate the order of the setups from one round to the next.
	if [ $((run % 2)) = 0 ]; then set -- $(printf '%s\n' "$@" | tac); fi
	for setup in "$@"; do
		remote=${setup#*-} bridging=${setup%-*}
		"start_$remote" "$B"
		"start_$bridging" "$A" bridge
		sleep 1 # the bridge connects
		# Latency first: a throughput case leaves a backlog that a slow remote
		# is still draining when the next case starts.
		measure "$setup" "$run" qos1-1k-direct -addr "$B" -mode pubsub -subs 1 -pubs 10 -rate 100 -qos 1 -duration 5s
		common=(-addr "$A" -sub-addr "$B" -mode pubsub -subs 1 -drain 60s)
		measure "$setup" "$run" qos1-1k-bridged "${common[@]}" -pubs 10 -rate 100 -qos 1 -duration 5s
		measure "$setup" "$run" qos0-throughput "${common[@]}" -pubs 4 -qos 0 -duration "$DUR"
		measure "$setup" "$run" qos1-throughput "${common[@]}" -pubs 4 -qos 1 -duration "$DUR"
		stop_all
	done
done
echo "bench-bridge: raw results in $WORK" >&2
