#!/bin/bash
# Runs the same simple load against one broker, three times, broker pinned to
# CPU 0 (GOMAXPROCS=1 for Go brokers) and load to CPU 1, then prints the
# broker's peak RSS and CPU ticks. Needs mosquitto for the mosquitto case.
#   bench/peers/run.sh xmq|mosquitto|mochi
set -u
b=$1
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
(cd "$here" && go build -o "$bin/peers" .) && (cd "$here/../.." && go build -o "$bin/xmq" ./cmd/xmq) || exit 1
case $b in
xmq) GOMAXPROCS=1 taskset -c 0 "$bin/xmq" -listen 127.0.0.1:1885 -data '' -log-level warn >$bin/broker.log 2>&1 & ;;
mosquitto) printf 'listener 1885 127.0.0.1\nallow_anonymous true\nmax_queued_messages 100000\n' >$bin/mosq.conf; taskset -c 0 mosquitto -c $bin/mosq.conf >$bin/broker.log 2>&1 & ;;
mochi) GOMAXPROCS=1 taskset -c 0 "$bin/peers" mochi -addr 127.0.0.1:1885 >$bin/broker.log 2>&1 & ;;
esac
pid=$!
sleep 1
for i in 1 2 3; do
  taskset -c 1 "$bin/peers" load -addr 127.0.0.1:1885 -mode ingest -pubs 10 -qos 0 -n 200000 | sed "s/^/$b ingest-q0 /"
  taskset -c 1 "$bin/peers" load -addr 127.0.0.1:1885 -mode ingest -pubs 10 -qos 1 -n 50000 | sed "s/^/$b ingest-q1 /"
  taskset -c 1 "$bin/peers" load -addr 127.0.0.1:1885 -mode fanout -pubs 10 -subs 100 -qos 0 -n 2000 -wait 20s | sed "s/^/$b fanout /"
done
echo "$b rss_kb $(grep VmHWM /proc/$pid/status | awk '{print $2}') cpu_ticks $(awk '{print $14+$15}' /proc/$pid/stat)"
kill $pid; wait $pid 2>/dev/null
