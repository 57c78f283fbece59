#!/usr/bin/env bash
# cluster.sh — a 3-node xmq cluster on this machine, for trying it out and
# for benchmarks: three xmq processes on loopback, each with an embedded
# NATS server routed to the other two, its own ports and data directory.
# Prints every URL; Ctrl-C (or SIGTERM) stops all three.
#
#   scripts/cluster.sh                  nodes n1 n2 n3, MQTT on 127.0.0.1:31883-31885
#   NODES=5 BASE=41883 scripts/cluster.sh
#   DATA=/tmp/xmq-cluster scripts/cluster.sh      (default ./data/cluster)
#   ARGS='-log-level debug' scripts/cluster.sh    (more flags for every node)
#   PPROF=1 scripts/cluster.sh          net/http/pprof of node i on 127.0.0.1:BASE+500+i
#   TLS=1 scripts/cluster.sh            routes over TLS, node certificates from DATA/certs (xmq certs -node)
#
# The cluster is secured as a deployment would be: a cluster secret in
# DATA/cluster.secret (made once with xmq cluster secret) that routes must
# present, and one NATS application user, app, whose password is in
# DATA/app.password: the nodes' own subjects and JetStream are out of its
# reach.
#
# Ports of node i (from 0): MQTT BASE+i, WebSocket BASE+400+i (/mqtt),
# dashboard and API BASE+100+i,
# NATS client BASE+200+i, NATS routes BASE+300+i.
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-3}
BASE=${BASE:-31883}
DATA=${DATA:-./data/cluster}
ARGS=${ARGS:-}
GO=${GO:-go}

mkdir -p bin "$DATA"
$GO build -o bin/xmq ./cmd/xmq
umask 077
[[ -s $DATA/cluster.secret ]] || bin/xmq cluster secret >"$DATA/cluster.secret"
[[ -s $DATA/app.password ]] || bin/xmq cluster secret >"$DATA/app.password"
app_password=$(cat "$DATA/app.password")

pids=()
stop() {
	trap - INT TERM EXIT
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "cluster stopped"
}
trap stop INT TERM EXIT

routes() { # every node's route address but node $1's
	local i out=()
	for ((i = 0; i < NODES; i++)); do
		((i == $1)) || out+=("127.0.0.1:$((BASE + 300 + i))")
	done
	local IFS=,
	echo "[${out[*]}]"
}

for ((i = 0; i < NODES; i++)); do
	n=n$((i + 1))
	dir=$DATA/$n
	mkdir -p "$dir"
	tls=""
	if [[ -n ${TLS:-} ]]; then
		bin/xmq certs -data "$DATA" -node "$n" >/dev/null
		tls="tls: {cert_file: $DATA/certs/node-$n.pem, key_file: $DATA/certs/node-$n-key.pem, ca_file: $DATA/certs/ca.pem}"
	fi
	cat >"$dir/xmq.yaml" <<YAML
# written by scripts/cluster.sh
listeners:
  - {name: mqtt, transport: tcp, address: "127.0.0.1:$((BASE + i))"}
  - {name: ws, transport: ws, address: "127.0.0.1:$((BASE + 400 + i))"}
cluster:
  enabled: true
  node: $n
  secret_file: $DATA/cluster.secret
  nats:
    embedded:
      listen: 127.0.0.1:$((BASE + 300 + i))
      client_listen: 127.0.0.1:$((BASE + 200 + i))
      routes: $(routes "$i")
      users: [{name: app, password: "$app_password"}]
      $tls
YAML
	# shellcheck disable=SC2086 # ARGS holds several flags
	pprof=()
	[[ -z ${PPROF:-} ]] || pprof=(-pprof "127.0.0.1:$((BASE + 500 + i))")
	bin/xmq -c "$dir/xmq.yaml" -data "$dir" -web "127.0.0.1:$((BASE + 100 + i))" "${pprof[@]}" \
		$ARGS 2>"$dir/xmq.log" &
	pids+=($!)
done

echo "xmq cluster of $NODES nodes (logs in $DATA/NODE/xmq.log):"
for ((i = 0; i < NODES; i++)); do
	printf '  n%d  mqtt://127.0.0.1:%d  ws://127.0.0.1:%d/mqtt  dashboard http://127.0.0.1:%d  nats://127.0.0.1:%d  routes 127.0.0.1:%d\n' \
		$((i + 1)) $((BASE + i)) $((BASE + 400 + i)) $((BASE + 100 + i)) $((BASE + 200 + i)) $((BASE + 300 + i))
done
echo "Every node's dashboard has a Nodes page (GET /api/v1/nodes: health and load of all nodes)."
echo "NATS applications log in as app, password in $DATA/app.password, and use mqtt.> (topic a/b is subject mqtt.a.b; docs/cluster.md)."
echo "Routes need the secret in $DATA/cluster.secret${TLS:+ and a certificate of $DATA/certs/ca.pem}. Ctrl-C stops the cluster."
# Any node exiting stops the cluster (a port in use, a bad flag …).
wait -n "${pids[@]}" || true
echo "a node exited; see $DATA/*/xmq.log" >&2
