#!/usr/bin/env bash
# deb-test.sh (make deb-test): installs the package make deb built on this
# machine (as CI does, in its throwaway container; as root) and checks it:
# lintian, the files and the xmq user, the unit (systemd-analyze verify, and its
# exposure score), the installed broker run as xmq with the installed
# configuration (listener ports moved to free ones by XMQ_ variables, the
# rest as shipped) serving MQTT, its state in /var/lib/xmq; then purges
# the package and checks nothing is left. Installing twice checks that the
# maintainer scripts run again cleanly (an upgrade).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ARCH=${ARCH:-$(go env GOARCH)}
fail() { echo "deb-test: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "must run as root (it installs the package)"
debs=("$DIST"/xmq_*_"$ARCH".deb)
[[ -f ${debs[0]} && ${#debs[@]} == 1 ]] || fail "want one $DIST/xmq_*_$ARCH.deb (make deb), found: ${debs[*]}"
deb=${debs[0]}
if dpkg-query -W xmq >/dev/null 2>&1; then
	fail "a package xmq is already installed; this test would replace and purge it"
fi
tmp=$(mktemp -d)
pid=
# The package leaves its system user on purge, as Debian packages do; the
# test removes it again when it made it, so a developer's machine is left
# as it was.
hadUser=
getent passwd xmq >/dev/null && hadUser=1
cleanup() {
	[[ -z $pid ]] || kill "$pid" 2>/dev/null || true
	dpkg --purge xmq >/dev/null 2>&1 || true
	[[ -n $hadUser ]] || userdel xmq 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# Debian's own check of the package: no error and no warning (the
# overrides the package ships say why a tag does not apply).
command -v lintian >/dev/null || fail "lintian is not installed (.ci/deps artefacts installs it)"
out=$(lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v 'running with root privileges') || true
[[ -z $out ]] || fail "lintian: $out"
echo "deb-test: lintian: clean"

dpkg -i "$deb" >/dev/null
dpkg -i "$deb" >/dev/null
for f in /usr/bin/xmq /usr/bin/loadtest /etc/xmq/xmq.yaml /etc/default/xmq /lib/systemd/system/xmq.service \
	/usr/share/man/man1/xmq.1.gz /usr/share/man/man5/xmq.yaml.5.gz /usr/share/man/man1/loadtest.1.gz \
	/usr/share/bash-completion/completions/xmq /usr/share/doc/xmq/copyright; do
	[[ -e $f ]] || fail "$f is not installed"
done
grep -qF "xmq $VERSION " <<<"$(/usr/bin/xmq version)" || fail "xmq version says $(/usr/bin/xmq version), not $VERSION"
id xmq >/dev/null || fail "no user xmq"
[[ $(stat -c '%U %a' /var/lib/xmq) == "xmq 750" ]] || fail "/var/lib/xmq is $(stat -c '%U %a' /var/lib/xmq)"
[[ $(stat -c '%G %a' /etc/xmq/xmq.yaml) == "xmq 640" ]] || fail "/etc/xmq/xmq.yaml is $(stat -c '%G %a' /etc/xmq/xmq.yaml)"
echo "deb-test: installed (twice): binaries, configuration, unit, man pages, completions; user xmq owns /var/lib/xmq"

# The unit. With man-db, verify also checks its Documentation= pages exist.
command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed (apt-get install systemd)"
man=no
command -v man >/dev/null && man=yes
out=$(systemd-analyze verify --man=$man /lib/systemd/system/xmq.service 2>&1) || true
[[ -z $out ]] || fail "systemd-analyze verify: $out"
score=$(systemd-analyze security --offline=yes /lib/systemd/system/xmq.service 2>/dev/null | tail -1) || true
echo "deb-test: systemd-analyze verify: clean; security: ${score:-not available}"

# The installed broker, as the service runs it (user xmq, the installed
# configuration), on free loopback ports.
env=(XMQ_LOG_FORMAT=json XMQ_WEB_ADDRESS=127.0.0.1:0)
for i in 0 1 2 3 4; do env+=("XMQ_LISTENERS_${i}_ADDRESS=127.0.0.1:0"); done
log=$tmp/xmq.log
: >"$log"
# setpriv execs xmq as xmq (runuser would stay its parent and hide its exit status).
setpriv --reuid=xmq --regid=xmq --init-groups env "${env[@]}" /usr/bin/xmq -c /etc/xmq/xmq.yaml 2>"$log" &
pid=$!
for _ in $(seq 100); do
	grep -q '"msg":"xmq started"' "$log" && break
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the installed broker exited"; }
	sleep 0.1
done
grep -q '"msg":"xmq started"' "$log" || { cat "$log" >&2; fail "the installed broker did not start"; }
tcp=$(grep '"msg":"listening"' "$log" | grep '"listener":"tcp"' | sed 's/.*"address":"\([^"]*\)".*/\1/')
web=$(grep '"url":"http' "$log" | sed 's|.*"url":"http://\([^/"]*\)/.*|\1|')
/usr/bin/xmq health -url "http://$web/healthz" >/dev/null || fail "/healthz on $web"
/usr/bin/loadtest -addr "$tcp" -mode pubsub -pubs 2 -subs 2 -qos 1 -clean=false -rate 50 -duration 2s -progress=false \
	-assert 'loss=0,delivered>=1' >"$tmp/loadtest.txt" || { cat "$tmp/loadtest.txt" >&2; fail "MQTT on $tcp"; }
kill -TERM "$pid"
wait "$pid" || fail "the broker exited with $? on SIGTERM"
pid=
grep -q '"msg":"xmq stopped"' "$log" || fail "no graceful stop"
[[ -d /var/lib/xmq/store && -f /var/lib/xmq/certs/ca.pem ]] || fail "no store or development CA in /var/lib/xmq"
[[ $(stat -c %U /var/lib/xmq/store) == xmq ]] || fail "/var/lib/xmq/store is not owned by xmq"
echo "deb-test: the installed broker served MQTT on $tcp and /healthz on $web as xmq; state in /var/lib/xmq"

dpkg --purge xmq >/dev/null
for f in /usr/bin/xmq /etc/xmq /var/lib/xmq /lib/systemd/system/xmq.service; do
	[[ ! -e $f ]] || fail "$f is left after purge"
done
echo "deb-test: purged cleanly"
size "$deb"
