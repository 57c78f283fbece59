#!/usr/bin/env bash
# bench-lowrate.sh — the many-connections, low-rate shapes (issue 13): idle
# connections over tcp, ws and tls (peak RSS, connects per broker
# CPU-second), 10 publishers × 100 msg/s → 10 subscribers over tcp and ws,
# 1,000 persistent pairs × 1 msg/s, 19,000 publishers → 10 shared
# subscribers, 19,000 WebSocket subscribers of their own topics, and the
# high-rate rows as a regression check. TLS rows: handshake storms (10,000
# connects, handshakes per broker CPU-second) with an RSA-2048 and an ECDSA
# P-256 certificate, X25519 only (no post-quantum hybrid), resumed sessions,
# and QoS 0/1 ingest over TLS. Each broker runs alone on CPU 0
# (GOMAXPROCS=1 for xmq), loadtest on CPU 1; runs alternate between the
# brokers, RUNS times, and the table gives medians with the range.
#
#   scripts/bench-lowrate.sh                           (make bench-lowrate)
#   BROKERS="xmq mosquitto" CASES="fan p2p" RUNS=3 scripts/bench-lowrate.sh
#   BASE=/path/to/older/xmq BROKERS="xmq base" ...     (an older build as "base")
#   DROP_CACHES=1 ...  (root: drop the page cache once the binaries are built; see below)
#
# xmq-store is the same xmq build with its default store (durability sync,
# the on-disk store in a fresh data directory under $WORK) for the cases in
# STORE_CASES; xmq keeps state in memory, as Mosquitto does by default.
#
# Needs: go, python3, taskset, openssl (the RSA certificate), mosquitto (skipped when missing), 2 CPUs and a
# file limit of 20,000 (the 19,000-connection cases).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
BROKERS=${BROKERS:-"xmq xmq-store mosquitto"}
CASES=${CASES:-"idle-tcp idle-ws idle-tls hs-rsa hs-ecdsa hs-x25519 hs-resumed fan fan-ws p2p fanin fanin19k ws19k qos0 qos1 qos0-tls qos1-tls fanout wake"}
STORE_CASES=${STORE_CASES:-"idle-tcp fan fan-ws p2p fanin"}
WORK=${WORK:-$(mktemp -d /tmp/bench-lowrate.XXXXXX)}
OUT=${OUT:-$WORK/table.md}
mkdir -p "$WORK/res"
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

go build -o "$WORK/xmq" ./cmd/xmq
go build -o "$WORK/loadtest" ./cmd/loadtest
if [ "${DROP_CACHES:-}" = 1 ]; then
	# A binary just written sits in the page cache in large folios, which
	# the kernel maps whole: its RSS then counts megabytes of code never
	# run. An installed binary is read in as it runs. Root only; the whole
	# machine's page cache goes.
	sync && echo 3 >/proc/sys/vm/drop_caches
fi
BIN_xmq=$WORK/xmq
BIN_base=${BASE:-}
# TLS certificates, readable by Mosquitto's own user: the development CA's
# (ECDSA P-256) and a self-signed RSA-2048 one.
"$BIN_xmq" certs -data "$WORK/certs" >/dev/null
mkdir -p "$WORK/tls" && cp "$WORK/certs/certs/server.pem" "$WORK/tls/ecdsa.pem" && cp "$WORK/certs/certs/server-key.pem" "$WORK/tls/ecdsa-key.pem"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/tls/rsa-key.pem" -out "$WORK/tls/rsa.pem" -days 30 \
	-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
chmod 755 "$WORK" "$WORK/tls" && chmod 644 "$WORK"/tls/*.pem
CERT=$WORK/tls/ecdsa.pem KEY=$WORK/tls/ecdsa-key.pem RSA_CERT=$WORK/tls/rsa.pem RSA_KEY=$WORK/tls/rsa-key.pem

# shellcheck source=scripts/benchlib.sh
. scripts/benchlib.sh
trap stop_broker EXIT

# start_broker NAME: tcp on 21883, ws on 21884, tls on 21885 (ECDSA), 21886
# (RSA) and 21887 (ECDSA, X25519 only; Mosquitto's OpenSSL 3.0 has no
# post-quantum hybrid: X25519 anyway).
start_broker() {
	local b=$1 log="$WORK/$1.log"
	case $b in
	xmq | base | xmq-store)
		local bin=$BIN_xmq data='""' # state in memory, as Mosquitto's default (persistence false)
		local x25519="  - {name: tls-x25519, transport: tls, address: \"127.0.0.1:21887\", tls: {cert_file: \"$CERT\", key_file: \"$KEY\", curves: [X25519]}}"
		if [ "$b" = base ]; then
			bin=$BIN_base
			x25519="" # an older build may not know tls.curves
		fi
		if [ "$b" = xmq-store ]; then
			# The default store (durability sync), fresh for every run.
			rm -rf "$WORK/data"
			data="\"$WORK/data\""
		fi
		cat >"$WORK/xmq.yaml" <<YAML
data_dir: $data
listeners:
  - {transport: tcp, address: "127.0.0.1:21883"}
  - {transport: ws, address: "127.0.0.1:21884"}
  - {transport: tls, address: "127.0.0.1:21885", tls: {cert_file: "$CERT", key_file: "$KEY"}}
  - {name: tls-rsa, transport: tls, address: "127.0.0.1:21886", tls: {cert_file: "$RSA_CERT", key_file: "$RSA_KEY"}}
$x25519
web: {address: ""}
log: {level: warn}
broker: {max_queued: 100000}
YAML
		GOMAXPROCS=1 taskset -c 0 "$bin" -c "$WORK/xmq.yaml" >"$log" 2>&1 &
		;;
	mosquitto)
		cat >"$WORK/mosquitto.conf" <<CONF
per_listener_settings false
allow_anonymous true
set_tcp_nodelay true
max_queued_messages 100000
listener 21883 127.0.0.1
listener 21884
protocol websockets
listener 21885 127.0.0.1
certfile $CERT
keyfile $KEY
listener 21886 127.0.0.1
certfile $RSA_CERT
keyfile $RSA_KEY
listener 21887 127.0.0.1
certfile $CERT
keyfile $KEY
CONF
		taskset -c 0 mosquitto -c "$WORK/mosquitto.conf" >"$log" 2>&1 &
		;;
	esac
	pid=$!
	wait_port 127.0.0.1:21883
	sleep 0.3
}

# args CASE: transport address and loadtest flags.
args() {
	case $1 in
	idle-tcp) echo "-addr 127.0.0.1:21883 -mode conn -levels 10000 -hold 5s -dial-concurrency 200" ;;
	idle-ws) echo "-addr ws://127.0.0.1:21884/mqtt -mode conn -levels 10000 -hold 5s -dial-concurrency 200" ;;
	idle-tls) echo "-addr mqtts://127.0.0.1:21885 -insecure -mode conn -levels 10000 -hold 5s -dial-concurrency 200" ;;
	fan) echo "-addr 127.0.0.1:21883 -mode pubsub -pubs 10 -subs 10 -qos 0 -rate 100 -payload 64 -duration 5s" ;;
	fan-ws) echo "-addr ws://127.0.0.1:21884/mqtt -mode pubsub -pubs 10 -subs 10 -qos 0 -rate 100 -payload 64 -duration 5s" ;;
	p2p) echo "-addr 127.0.0.1:21883 -mode p2p -pubs 1000 -qos 1 -rate 1 -payload 62 -duration 10s" ;;
	fanin) echo "-addr 127.0.0.1:21883 -mode fanin -pubs 1000 -subs 10 -qos 1 -rate 1 -payload 64 -topic bench/%i -sub-topic \$share/g/bench/# -duration 10s" ;;
	fanin19k) echo "-addr 127.0.0.1:21883 -mode fanin -pubs 19000 -subs 10 -qos 1 -rate 1 -payload 64 -topic bench/%i -sub-topic \$share/g/bench/# -duration 20s -dial-concurrency 200" ;;
	ws19k) echo "-addr ws://127.0.0.1:21884/mqtt -mode p2p -loop -pubs 19000 -qos 1 -rate 0.1 -payload 256 -topic t/%i -duration 30s -dial-concurrency 200" ;;
	qos0) echo "-addr 127.0.0.1:21883 -mode pub -pubs 10 -qos 0 -payload 64 -duration 4s" ;;
	qos1) echo "-addr 127.0.0.1:21883 -mode pub -pubs 10 -qos 1 -inflight 64 -payload 64 -duration 4s" ;;
	fanout) echo "-addr 127.0.0.1:21883 -mode pubsub -pubs 10 -subs 100 -qos 0 -rate 0 -payload 64 -topic bench/fanout -sub-topic bench/fanout -duration 4s -drain 3s" ;;
	# Waking a parked connection (issue 24): PINGREQ after 300ms quiet.
	wake) echo "-addr 127.0.0.1:21883 -mode conn -levels 1000 -hold 1s -wake 20 -wake-idle 300ms" ;;
	hs-rsa) echo "-addr mqtts://127.0.0.1:21886 -insecure -mode conn -levels 10000 -hold 1s -dial-concurrency 200" ;;
	hs-ecdsa) echo "-addr mqtts://127.0.0.1:21885 -insecure -mode conn -levels 10000 -hold 1s -dial-concurrency 200" ;;
	hs-x25519) echo "-addr mqtts://127.0.0.1:21887 -insecure -mode conn -levels 10000 -hold 1s -dial-concurrency 200" ;;
	hs-resumed) echo "-addr mqtts://127.0.0.1:21885 -insecure -tls-resume -mode conn -levels 10000 -hold 1s -dial-concurrency 200" ;;
	qos0-tls) echo "-addr mqtts://127.0.0.1:21885 -insecure -mode pub -pubs 10 -qos 0 -payload 64 -duration 4s" ;;
	qos1-tls) echo "-addr mqtts://127.0.0.1:21885 -insecure -mode pub -pubs 10 -qos 1 -inflight 64 -payload 64 -duration 4s" ;;
	esac
}

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

for c in $CASES; do
	for i in $(seq "$RUNS"); do
		for b in $BROKERS; do
			case $b in
			mosquitto) command -v mosquitto >/dev/null || continue ;;
			base) [ -n "$BIN_base" ] || continue ;;
			xmq-store) [[ " $STORE_CASES " == *" $c "* ]] || continue ;;
			esac
			start_broker "$b"
			f="$WORK/res/$c.$b.$i"
			t0=$(ticks "$pid")
			# shellcheck disable=SC2046 # args is a word list
			# MQTT 3.1.1, as the figures in docs/benchmarks.md were taken.
			taskset -c 1 "$WORK/loadtest" -mqtt 3.1.1 -progress=false -json -broker-pid "$pid" $(args "$c") >"$f.json" 2>"$f.err" || true
			echo "$(($(ticks "$pid") - t0)) $(getconf CLK_TCK) $(awk '/^VmHWM/{print $2*1024}' "/proc/$pid/status")" >"$f.cpu"
			stop_broker
			echo "bench-lowrate: $c $b $i" >&2
		done
	done
done

python3 - "$WORK/res" "$OUT" <<'PY'
import glob, json, os, statistics, sys
res, out = sys.argv[1], sys.argv[2]
rows = {}
for f in sorted(glob.glob(os.path.join(res, "*.json"))):
    base = f[:-5]
    case, broker, run = os.path.basename(base).split(".")
    try:
        d = json.load(open(f))
        ticks, hz, hwm = open(base + ".cpu").read().split()
    except Exception:
        continue
    cpu = int(ticks) / int(hz)
    cs = d.get("cases") or []
    if not cs:
        continue
    c = cs[-1]
    l = c.get("wake_summary") or c.get("latency_summary") or {}  # wake: the parked round trip
    n = c.get("delivered") or c.get("established") or c.get("published") or 0
    rows.setdefault((case, broker), []).append({
        "p50": l.get("p50_ns", 0) / 1000, "p99": l.get("p99_ns", 0) / 1000,
        "n": n, "per_cpu_s": n / cpu if cpu else 0, "rss": int(hwm) / 2**20,
        "rate": c.get("delivered_per_s") or c.get("published_per_s") or 0,
        "lost": c.get("lost", 0),
        "max": l.get("max_ns", 0) / 1000, "busy": (c.get("wake_busy_summary") or {}).get("p50_ns", 0) / 1000,
    })
def med(vals):
    vals = sorted(vals)
    m = statistics.median(vals)
    return m, vals[0], vals[-1]
def fmt(t, unit=""):
    m, lo, hi = t
    if m >= 1000:
        return f"{m:,.0f}{unit} ({lo:,.0f}–{hi:,.0f})"
    return f"{m:.0f}{unit} ({lo:.0f}–{hi:.0f})"
with open(out, "w") as o:
    o.write("| case | broker | runs | p50 µs | p99 µs | per broker CPU-second | rate/s | peak RSS MiB | lost |\n")
    o.write("|---|---|---|---|---|---|---|---|---|\n")
    for (case, broker), rs in sorted(rows.items()):
        o.write(f"| {case} | {broker} | {len(rs)} | {fmt(med([r['p50'] for r in rs]))} | {fmt(med([r['p99'] for r in rs]))} | "
                f"{fmt(med([r['per_cpu_s'] for r in rs]))} | {fmt(med([r['rate'] for r in rs]))} | "
                f"{fmt(med([r['rss'] for r in rs]))} | {sum(r['lost'] for r in rs)} |\n")
    wake = sorted((k, rs) for k, rs in rows.items() if k[0] == "wake")
    if wake:
        o.write("\n| PINGREQ after 300 ms idle, 20 tries | broker | runs | wake p50 µs | wake max µs | busy p50 µs |\n|---|---|---|---|---|---|\n")
        for (case, broker), rs in wake:
            o.write(f"| {case} | {broker} | {len(rs)} | {fmt(med([r['p50'] for r in rs]))} | {fmt(med([r['max'] for r in rs]))} | "
                    f"{fmt(med([r['busy'] for r in rs]))} |\n")
print(open(out).read())
PY
echo "bench-lowrate: table in $OUT (raw results in $WORK/res)" >&2
