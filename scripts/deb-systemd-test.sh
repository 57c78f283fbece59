#!/usr/bin/env bash
# deb-systemd-test.sh (make deb-systemd-test): the Debian package under a
# real systemd. It boots this machine's own Debian in a container
# (systemd-nspawn, package systemd-container: /usr, /etc and /var as
# throwaway overlays, a private network), installs the package there so
# that postinst enables and starts the service, and checks what the unit
# promises: `systemctl start` returns once xmq has notified READY=1 (its
# listeners accept), the hardening leaves it working (MQTT, /healthz),
# `systemctl reload` (SIGHUP), Restart=on-failure after a kill -9, a clean
# stop, and the exposure score systemd-analyze gives it. Root only.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ARCH=${ARCH:-$(go env GOARCH)}
fail() { echo "deb-systemd-test: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "must run as root"
command -v systemd-nspawn >/dev/null || fail "systemd-nspawn is not installed (apt-get install systemd-container)"
debs=("$DIST"/xmq_*_"$ARCH".deb)
[[ -f ${debs[0]} && ${#debs[@]} == 1 ]] || fail "want one $DIST/xmq_*_$ARCH.deb (make deb)"
dist=$(realpath "$DIST")
log=$(mktemp)
systemd-nspawn --quiet --volatile=yes -D / --boot --machine="xmq-test-$$" --console=passive --register=no --keep-unit \
	--private-network --overlay=/etc::/etc --overlay=/var::/var --overlay=/usr::/usr --bind-ro="$dist:/mnt/dist" \
	>"$log" 2>&1 &
nspawn=$!
init=
# nspawn powers the container off on SIGTERM; if it has not within 20s,
# its init (whose end ends every process of the container) is killed.
stop() {
	kill "$nspawn" 2>/dev/null || true
	for _ in $(seq 40); do
		kill -0 "$nspawn" 2>/dev/null || break
		sleep 0.5
	done
	[[ -z $init ]] || kill -9 "$init" 2>/dev/null || true
	kill -9 "$nspawn" 2>/dev/null || true
	wait "$nspawn" 2>/dev/null || true
	rm -f "$log"
}
trap stop EXIT
# The container's systemd is nspawn's child.
for _ in $(seq 100); do
	init=$(ps -o pid=,comm= --ppid "$nspawn" | awk '$2 == "systemd" { print $1 }') || true
	[[ -n $init ]] && break
	sleep 0.1
done
[[ -n $init ]] || { cat "$log" >&2; fail "the container did not start"; }
inside() { nsenter -t "$init" -a "$@"; }
state=
for _ in $(seq 120); do
	state=$(inside systemctl is-system-running 2>/dev/null) || true
	[[ $state == running || $state == degraded ]] && break
	sleep 0.5
done
[[ $state == running || $state == degraded ]] || fail "the container's systemd is $state"
# This machine's own services boot too: stop any that holds xmq's ports.
for port in 1883 8883 8083 8084 18083; do
	for pid in $(inside ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u || true); do
		unit=$(inside ps -o unit= -p "$pid" | tr -d ' ') || true
		[[ -z $unit ]] || inside systemctl stop "$unit"
	done
done

# A container image's policy-rc.d (exit 101: start nothing) would stop
# postinst from starting the service, as Debian means it to; a booted
# machine has none (/usr is a throwaway overlay here).
inside rm -f /usr/sbin/policy-rc.d
pkg=/mnt/dist/$(basename "${debs[0]}")
inside dpkg -i "$pkg" >/dev/null 2>&1 || true
show() { inside systemctl show xmq -p "$1" --value; }
[[ $(inside systemctl is-enabled xmq) == enabled && $(show ActiveState) == active ]] ||
	{ inside journalctl -u xmq --no-pager -o cat | tail -20 >&2; fail "postinst did not enable and start xmq"; }
# Again from stopped: start returns only once xmq notified READY=1.
inside systemctl stop xmq
start=$(date +%s%N)
inside systemctl start xmq || { inside journalctl -u xmq --no-pager -o cat | tail -20 >&2; fail "systemctl start xmq failed"; }
took=$((($(date +%s%N) - start) / 1000000))
[[ $(show Type) == notify && $(show ActiveState) == active && $(show StatusText) == "serving MQTT" ]] ||
	fail "after start: $(show Type) $(show ActiveState) status '$(show StatusText)'"
# Ready means accepting: no wait, no retry.
inside xmq health -c /etc/xmq/xmq.yaml >/dev/null || fail "ready, but /healthz does not answer"
inside loadtest -addr 127.0.0.1:1883 -mode pubsub -pubs 2 -subs 2 -qos 1 -rate 50 -duration 2s -progress=false \
	-assert 'loss=0,delivered>=1' >/dev/null || fail "MQTT on port 1883 of the service failed"
echo "deb-systemd-test: installed, enabled and started by postinst; systemctl start returned in ${took} ms, active (Type=notify, \"serving MQTT\"); MQTT and /healthz work under the hardening"

inside systemctl reload xmq
sleep 1
grep -q 'SIGHUP: reloading' <<<"$(inside journalctl -u xmq --no-pager -o cat)" || fail "reload did not reach xmq"
pid=$(show MainPID)
restarts=$(show NRestarts)
inside kill -9 "$pid"
for _ in $(seq 50); do
	[[ $(show MainPID) != "$pid" && $(show ActiveState) == active && $(show MainPID) != 0 ]] && break
	sleep 0.2
done
[[ $(show NRestarts) -gt $restarts && $(show ActiveState) == active ]] || fail "not restarted after kill -9"
echo "deb-systemd-test: reload (SIGHUP) works; restarted after kill -9"

inside systemctl stop xmq
[[ $(show ActiveState) == inactive ]] || fail "not inactive after stop"
grep -q '"msg":"xmq stopped"' <<<"$(inside journalctl -u xmq --no-pager -o cat)" || fail "no graceful stop"
echo "deb-systemd-test: stopped gracefully; $(inside systemd-analyze security xmq --no-pager 2>/dev/null | tail -1)"

# Another broker holds port 1883 (a Mosquitto not yet removed): the
# upgrade's restart fails, and postinst says so instead of hiding it.
inside python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 1883)); s.listen(); time.sleep(60)' &
holder=$!
for _ in $(seq 50); do inside ss -ltnH "sport = :1883" | grep -q . && break; sleep 0.1; done
out=$(inside dpkg -i "$pkg" 2>&1) || true
kill "$holder" 2>/dev/null || true
grep -q "the service did not restart" <<<"$out" || fail "a failed restart went unsaid: $out"
echo "deb-systemd-test: a start that fails (port 1883 taken) is said by postinst, the upgrade itself succeeds"
