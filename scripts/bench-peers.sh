#!/usr/bin/env bash
# bench-peers.sh — xmq against Mosquitto, mochi-mqtt and NATS's MQTT listener,
# each broker alone on CPU 0 (GOMAXPROCS=1 for the Go ones), the load
# generator (cmd/loadtest) on CPU 1. Every scenario runs RUNS times against a
# freshly started broker; the broker's CPU time comes from /proc/PID/stat
# around each run and its peak RSS from /proc/PID/status (VmHWM) at the end.
# Writes raw JSON under $WORK/res and the markdown table to $OUT.
#
#   scripts/bench-peers.sh                    (make bench-peers)
#   BROKERS="xmq mochi" RUNS=1 DUR=2s scripts/bench-peers.sh
#
# Needs: go, python3, taskset, mosquitto, nats-server on PATH (a missing peer
# is skipped), 2 CPUs, and a file limit of at least 20,000.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/benchmarks.md}
RUNS=${RUNS:-3}
DUR=${DUR:-4s}         # publishing time per run
BROKERS=${BROKERS:-"xmq mosquitto mochi nats"}
SCENARIOS=${SCENARIOS:-"qos0 qos1 fanout latency fanin p2p idle"}
TRANSPORTS=${TRANSPORTS:-"tcp tls ws wss quic"}
WORK=${WORK:-$(mktemp -d /tmp/bench-peers.XXXXXX)}
ADDR=127.0.0.1:1883
mkdir -p "$WORK/res"

ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

echo "bench-peers: building into $WORK" >&2
go build -o "$WORK/xmq" ./cmd/xmq
go build -o "$WORK/loadtest" ./cmd/loadtest
(cd bench/peers && go build -o "$WORK/peers" .)

# shellcheck source=scripts/benchlib.sh
. scripts/benchlib.sh
trap stop_broker EXIT

# start_broker NAME [all]: one broker on CPU 0; "all" gives xmq every transport.
start_broker() {
	local b=$1 log="$WORK/$1.log"
	case $b in
	xmq)
		if [ "${2:-}" = all ]; then
			rm -rf "$WORK/xmqdata"
			cat >"$WORK/xmq.yaml" <<YAML
data_dir: $WORK/xmqdata
listeners:
  - {transport: tcp, address: "127.0.0.1:1883"}
  - {transport: tls, address: "127.0.0.1:8883"}
  - {transport: ws, address: "127.0.0.1:8083"}
  - {transport: wss, address: "127.0.0.1:8084"}
  - {transport: quic, address: "127.0.0.1:14567"}
YAML
			GOMAXPROCS=1 taskset -c 0 "$WORK/xmq" -c "$WORK/xmq.yaml" -web "" -log-level warn >"$log" 2>&1 &
		else
			GOMAXPROCS=1 taskset -c 0 "$WORK/xmq" -listen $ADDR -data "" -web "" -log-level warn >"$log" 2>&1 &
		fi
		;;
	mosquitto) # Nagle off, as every Go broker has it: its default adds ~9 ms of latency
		printf 'listener 1883 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n' >"$WORK/mosquitto.conf"
		taskset -c 0 mosquitto -c "$WORK/mosquitto.conf" >"$log" 2>&1 &
		;;
	mochi)
		GOMAXPROCS=1 taskset -c 0 "$WORK/peers" mochi -addr $ADDR >"$log" 2>&1 &
		;;
	nats)
		rm -rf "$WORK/nats"
		cat >"$WORK/nats.conf" <<CONF
server_name: xmqbench
listen: 127.0.0.1:4223
jetstream { store_dir: "$WORK/nats" }
mqtt { listen: "$ADDR" }
CONF
		GOMAXPROCS=1 taskset -c 0 nats-server -c "$WORK/nats.conf" >"$log" 2>&1 &
		;;
	esac
	pid=$!
	wait_port $ADDR
	sleep 0.3
}

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

# run NAME SCENARIO TAG LOADTEST-ARGS...: one loadtest run on CPU 1.
run() {
	local b=$1 s=$2 tag=$3
	shift 3
	local f="$WORK/res/$b.$s.$tag"
	local t0
	t0=$(ticks "$pid")
	# MQTT 3.1.1: NATS's MQTT listener speaks nothing else, and the published figures were taken so.
	taskset -c 1 "$WORK/loadtest" -mqtt 3.1.1 -progress=false -json -broker-pid "$pid" "$@" >"$f.json" 2>"$f.err" || true
	echo "$(($(ticks "$pid") - t0)) $(getconf CLK_TCK)" >"$f.cpu"
	echo "bench-peers: $b $s $tag done" >&2
}

# args SCENARIO: the loadtest flags of a scenario.
args() {
	case $1 in
	qos0) echo "-mode pub -pubs 10 -qos 0 -payload 64 -duration $DUR" ;;
	qos1) echo "-mode pub -pubs 10 -qos 1 -inflight 64 -payload 64 -duration $DUR" ;;
	fanout) echo "-mode pubsub -pubs 10 -subs 100 -qos 0 -rate 0 -payload 64 -topic bench/fanout -sub-topic bench/fanout -duration $DUR -drain 3s" ;;
	latency) echo "-mode pubsub -pubs 10 -subs 10 -qos 0 -rate 100 -payload 64 -duration $DUR" ;;
	fanin) echo "-mode fanin -pubs 1000 -subs 10 -qos 1 -rate 1 -payload 64 -topic bench/%i -sub-topic \$share/g/bench/# -duration $DUR" ;;
	p2p) echo "-mode p2p -pubs 1000 -qos 1 -rate 1 -payload 62 -duration $DUR" ;;
	idle) echo "-mode conn -levels 10000 -hold 5s -dial-concurrency 200" ;;
	esac
}

for b in $BROKERS; do
	case $b in
	mosquitto) command -v mosquitto >/dev/null || { echo "bench-peers: no mosquitto, skipped" >&2; continue; } ;;
	nats) command -v nats-server >/dev/null || { echo "bench-peers: no nats-server, skipped" >&2; continue; } ;;
	esac
	for s in $SCENARIOS; do
		start_broker "$b"
		for i in $(seq "$RUNS"); do
			# shellcheck disable=SC2046 # args is a word list
			run "$b" "$s" "$i" $(args "$s")
		done
		grep VmHWM "/proc/$pid/status" | awk '{print $2 * 1024}' >"$WORK/res/$b.$s.hwm"
		stop_broker
	done
done

# xmq over every transport: QoS 0 ingest, as a ratio to TCP.
if [[ " $BROKERS " == *" xmq "* ]]; then
	start_broker xmq all
	for i in $(seq "$RUNS"); do
		for t in $TRANSPORTS; do
			run xmq "transport-$t" "$i" -addr 127.0.0.1 -transport "$t" -insecure -mode pub -pubs 10 -qos 0 -payload 64 -duration "$DUR"
		done
	done
	stop_broker
fi

python3 scripts/bench-table.py "$WORK/res" "$OUT"
echo "bench-peers: wrote $OUT (raw results in $WORK/res)" >&2
