#!/usr/bin/env bash
# soak.sh: run xmq under steady fan-out for a long time and record whether
# it stays flat: RSS, goroutines and open files sampled every INTERVAL
# seconds, slow-consumer drops counted, and every warning or error the
# broker logs. The broker runs on CPU 0 (GOMAXPROCS=1), loadtest on CPU 1.
#
#   scripts/soak.sh                      # 10 minutes, 10 pubs x 1,500/s -> 100 subs (1.5M deliveries/s)
#   DURATION=30m RATE=3000 scripts/soak.sh
#
# Writes $OUT/samples.csv, $OUT/broker.log, $OUT/loadtest.txt and a summary
# on stdout; exits 1 when the broker logged an error, RSS or goroutines grew
# by more than a quarter between the first and the last third of the run,
# or loadtest failed.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10m}
RATE=${RATE:-1500}
PUBS=${PUBS:-10}
SUBS=${SUBS:-100}
INTERVAL=${INTERVAL:-10}
PORT=${PORT:-18830}
WEB=${WEB:-127.0.0.1:18093}
OUT=${OUT:-$(mktemp -d /tmp/xmq-soak.XXXXXX)}
mkdir -p "$OUT" bin

go build -o bin/xmq ./cmd/xmq
go build -o bin/loadtest ./cmd/loadtest

GOMAXPROCS=1 taskset -c 0 bin/xmq -listen 127.0.0.1:$PORT -data "" -web "$WEB" \
	-log-format json -log-level info 2>"$OUT/broker.log" &
broker=$!
trap 'kill $broker 2>/dev/null || true; kill $sampler 2>/dev/null || true' EXIT
for _ in $(seq 50); do
	curl -sf "http://$WEB/readyz" >/dev/null && break
	sleep 0.1
done

metric() { # metric NAME [LABEL-FILTER]: sum of a /metrics series
	awk -v n="$1" -v f="${2:-}" '$1 ~ "^"n"([{]|$)" && index($1, f) { s += $2 } END { printf "%.0f", s }' "$3"
}

sample() {
	echo "seconds,rss_kib,goroutines,open_fds,connected,delivered_total,dropped_queue_full,dropped_total"
	local start=$SECONDS m="$OUT/metrics.txt"
	while kill -0 $broker 2>/dev/null; do
		curl -sf "http://$WEB/metrics" >"$m" || break
		rss=$(awk '/^VmRSS/ {print $2}' /proc/$broker/status)
		fds=$(ls /proc/$broker/fd | wc -l)
		echo "$((SECONDS - start)),$rss,$(metric go_goroutines "" "$m"),$fds,$(metric xmq_connections "" "$m"),$(metric xmq_messages_sent_total "" "$m"),$(metric xmq_messages_dropped_total queue_full "$m"),$(metric xmq_messages_dropped_total "" "$m")"
		sleep "$INTERVAL"
	done
}
sample >"$OUT/samples.csv" &
sampler=$!

status=0
taskset -c 1 bin/loadtest -addr 127.0.0.1:$PORT -mode pubsub -pubs "$PUBS" -subs "$SUBS" -qos 0 \
	-rate "$RATE" -payload 64 -topic soak/fanout -sub-topic soak/fanout -duration "$DURATION" -drain 5s \
	-progress=false -broker-pid $broker >"$OUT/loadtest.txt" 2>&1 || status=1
sleep "$INTERVAL" # one sample after the load stopped
kill $sampler 2>/dev/null || true
kill -INT $broker
wait $broker || true

cat "$OUT/loadtest.txt"
python3 - "$OUT" <<'EOF' || status=1
import csv, json, sys
out = sys.argv[1]
rows = [r for r in csv.DictReader(open(f"{out}/samples.csv"))]
load = [r for r in rows if int(r["connected"]) > 0]
if len(load) < 6:
    sys.exit(f"soak: only {len(load)} samples under load")
third = len(load) // 3
def avg(rs, k): return sum(int(r[k]) for r in rs) / len(rs)
ok = True
print(f"samples under load: {len(load)} (every {int(load[1]['seconds']) - int(load[0]['seconds'])} s)")
for k in ("rss_kib", "goroutines", "open_fds"):
    a, b = avg(load[:third], k), avg(load[-third:], k)
    grew = b / a - 1 if a else 0
    flat = grew <= 0.25
    ok &= flat
    print(f"{k:12} first third {a:10.0f}  last third {b:10.0f}  change {grew:+.1%}  {'flat' if flat else 'GREW'}")
print(f"peak RSS {max(int(r['rss_kib']) for r in rows) / 1024:.1f} MiB, goroutines {min(int(r['goroutines']) for r in load)}-{max(int(r['goroutines']) for r in load)}")
last = rows[-1]
print(f"delivered {int(last['delivered_total']):,}, dropped (slow consumer, queue full) {int(last['dropped_queue_full']):,}, dropped in all {int(last['dropped_total']):,}")
bad = []
for line in open(f"{out}/broker.log"):
    try:
        level = json.loads(line).get("level")
    except ValueError:
        level = "unparsed"
    if level not in ("debug", "info"):
        bad.append(line.rstrip())
print(f"broker log: {len(bad)} line(s) above info")
for line in bad[:20]:
    print("  " + line)
ok &= not any('"level":"error"' in l or '"level":"fatal"' in l or "panic" in l for l in bad)
sys.exit(0 if ok else 1)
EOF
echo "soak: samples and logs in $OUT"
exit $status
