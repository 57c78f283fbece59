#!/usr/bin/env bash
# image-test.sh (make image-test): checks the image make image built.
#  1. Its root file system alone: the binary is static (it runs chrooted
#     with nothing else), the configuration in it is valid, as user xmq.
#  2. With podman: the container runs as xmq, is healthy (HEALTHCHECK
#     against /healthz), takes XMQ_ variables, serves MQTT through a
#     published port (loadtest: no message lost), keeps its store in the
#     /data volume, and stops gracefully.
# Runs as root (chroot, rootful podman).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

IMAGE=${IMAGE:-xmq}
root=$DIST/image/rootfs
[[ -x $root/usr/bin/xmq ]] || { echo "image-test: no $root (make image)" >&2; exit 1; }
fail() { echo "image-test: $*" >&2; exit 1; }

# 1. The root file system.
chroot --userspec=65532:65532 "$root" /usr/bin/xmq version
chroot --userspec=65532:65532 "$root" /usr/bin/xmq config print -c /etc/xmq/xmq.yaml >/dev/null ||
	fail "the image's configuration does not load"
echo "image-test: rootfs ok (static binary runs alone, configuration valid)"

# 2. The container. Where the kernel's cgroups are v1 or hybrid, podman's
# default runtime crun refuses to start ("cgroups in hybrid mode not
# supported"); runc runs there. podman asks for rlimits (1048576 open
# files) that a sandbox may forbid raising even to root: ask for what this
# shell has.
command -v podman >/dev/null || fail "podman is not installed (apt-get install podman)"
pod=(podman)
if [[ $(podman info --format '{{.Host.CgroupsVersion}}') == v1 ]] && command -v runc >/dev/null; then
	pod+=(--runtime runc)
fi
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
pidmax=$(cat /proc/sys/kernel/pid_max)
[[ $nproc == unlimited || $nproc -gt $pidmax ]] && nproc=$pidmax
name=xmq-image-test-$$
vol=$name-data
cleanup() {
	"${pod[@]}" rm -f -t 0 "$name" >/dev/null 2>&1 || true
	"${pod[@]}" volume rm -f "$vol" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# podman schedules health checks with systemd timers and logs an error
# where there is no systemd (CI's container): the test runs the checks
# itself (podman healthcheck run), and shows podman's messages on failure.
perr=$(mktemp)
"${pod[@]}" run -d --name "$name" --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
	-p 127.0.0.1::1883 -p 127.0.0.1::18083 -v "$vol:/data" \
	-e XMQ_AUTH_ALLOW_ANONYMOUS=true -e XMQ_BROKER_MAX_QUEUED=4321 -e XMQ_LOG_FORMAT=json \
	"localhost/$IMAGE:$VERSION" >/dev/null 2>"$perr" || { cat "$perr" >&2; fail "podman run failed"; }

healthy=
for _ in $(seq 60); do
	if "${pod[@]}" healthcheck run "$name" >/dev/null 2>&1; then
		healthy=1
		break
	fi
	sleep 0.5
done
[[ -n $healthy ]] || { "${pod[@]}" logs "$name" >&2; fail "the container never became healthy"; }
echo "image-test: healthy (HEALTHCHECK: xmq health against /healthz)"

user=$("${pod[@]}" top "$name" user | tail -n +2 | tr -d ' ')
[[ $user == xmq || $user == 65532 ]] || fail "the broker runs as $user, not xmq"
grep -q 'max_queued: 4321 # XMQ_BROKER_MAX_QUEUED' <<<"$("${pod[@]}" exec "$name" /usr/bin/xmq config print -c /etc/xmq/xmq.yaml)" ||
	fail "XMQ_BROKER_MAX_QUEUED did not reach the configuration"
echo "image-test: runs as $user; XMQ_ variables configure it"

mqtt=$("${pod[@]}" port "$name" 1883/tcp)
web=$("${pod[@]}" port "$name" 18083/tcp)
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp" "$perr"' EXIT
go build -o "$tmp/loadtest" ./cmd/loadtest
go build -o "$tmp/xmq" ./cmd/xmq
"$tmp/xmq" health -url "http://$web/healthz" >/dev/null || fail "/healthz not reachable on the published port $web"
"$tmp/loadtest" -addr "$mqtt" -mode pubsub -pubs 2 -subs 2 -qos 1 -rate 50 -duration 2s -progress=false \
	-assert 'loss=0,delivered>=1' >"$tmp/loadtest.txt" || { cat "$tmp/loadtest.txt" >&2; fail "MQTT through $mqtt failed"; }
echo "image-test: MQTT through $mqtt and the dashboard port $web work"

"${pod[@]}" stop -t 20 "$name" >/dev/null 2>>"$perr" || { cat "$perr" >&2; fail "podman stop failed"; }
grep -q '"msg":"xmq stopped"' <<<"$("${pod[@]}" logs "$name" 2>&1)" || { "${pod[@]}" logs "$name" >&2; fail "no graceful stop"; }
mnt=$("${pod[@]}" volume inspect --format '{{.Mountpoint}}' "$vol")
[[ -d $mnt/store && -f $mnt/certs/ca.pem ]] || fail "no store or development CA in the /data volume ($mnt)"
[[ $(stat -c %u "$mnt/store") == 65532 ]] || fail "the store in /data is not owned by xmq"
echo "image-test: stopped gracefully; store and CA kept in the /data volume"
"${pod[@]}" image inspect --format 'image-test: ok, {{.Size}} bytes uncompressed' "localhost/$IMAGE:$VERSION"
