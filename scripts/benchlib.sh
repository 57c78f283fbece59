# shellcheck shell=bash
# benchlib.sh: what the benchmark scripts (bench-peers.sh, bench-lowrate.sh,
# bench-bridge.sh) share. Sourced, not run.

# wait_port HOST:PORT: until something listens there (up to 10 s).
wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "$(basename "$0"): nothing listens on $1" >&2
	return 1
}

# pid is the broker the script runs now; stop_broker stops it (the scripts
# trap EXIT with it).
pid=""
stop_broker() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=""
	fi
}
