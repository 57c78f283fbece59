package main

import (
	"fmt"
	"io"
)

// printUsage documents every flag; a test checks none is missing. It is
// also the text of the man page xmq(1) (make man): lines ending in a colon
// at the margin are its sections, "  -flag ARG" lines its flag entries.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `xmq is an MQTT 3.1, 3.1.1 and 5.0 broker.

Usage:
  xmq [flags]        serve MQTT; with no flags, data directory ./data and
                       mqtt   TCP        :1883
                       mqtts  TLS        :8883
                       ws     WebSocket  :8083/mqtt
                       wss    WebSocket  :8084/mqtt over TLS
                       quic   QUIC       :14567/udp (ALPN mqtt)
                     the TLS ones with a development CA made on first start:
                     clients trust ./data/certs/ca.pem
  xmq certs [flags]  print the development CA's files, creating them if missing
                     (xmq certs -h for -host names, regenerating, client and
                     cluster node certificates)
  xmq cluster secret print a new cluster secret, for cluster.secret_file on
                     every node of a cluster
  xmq passwd [-b] [-D] FILE USER [PASSWORD]
                     add, change or delete a user of a password file, in the
                     hash its entries use; xmq passwd -U FILE hashes a
                     plain-text file (xmq passwd -h for the hash and SCRAM options)
  xmq import mosquitto.conf > xmq.yaml
                     convert a Mosquitto configuration, with a comment for
                     every option (xmq import -h)
  xmq store check [DATA_DIR]
                     read every record of the store, read-only, and report
                     what is damaged (default ./data)
  xmq config print [flags]
                     print the configuration in effect with these flags (the
                     file, the XMQ_ environment, the flags), secrets masked
  xmq config env     list the environment variable of every configuration key
  xmq check-config [-c FILE] [flags]
                     check a configuration without serving: keys and values,
                     the files it names, certificates against their keys,
                     the data directory and the ports; every problem listed,
                     exit status 1 if there is any (xmq check-config -h)
  xmq health [-c FILE]
                     ask the running broker's /healthz: exit 0 when healthy
                     (the container image's HEALTHCHECK)
  xmq completion bash|zsh|fish
                     print a shell completion script
  xmq version        print the version, commit, date, Go version and platform

Flags (each one given overrides the configuration file and the environment):
  -c FILE, -config FILE
        YAML configuration file. xmq.example.yaml lists every key with its
        default; unknown keys are errors.
  -listen ADDR
        serve MQTT over TCP on ADDR (host:port; port 0 picks a free port).
        Repeat the flag or separate addresses with commas for several
        listeners. Replaces every listener of the defaults or the file
        (TLS, WebSocket and QUIC included) with these TCP ones.
  -data DIR
        data directory, created if missing. Default "./data". Persistent
        sessions, their queued messages, retained messages, delayed wills
        and the bans set through the admin API are stored in DIR/store and
        survive a restart or a crash (see the store section of
        xmq.example.yaml for durability). -data "" keeps state in memory:
        it is lost when xmq exits.
`+authUsage+webUsage+`  -log-level LEVEL
        debug, info, warn or error. Default "info".
  -log-format FORMAT
        auto, console or json. Default "auto": console on a terminal,
        JSON otherwise.
  -pprof ADDR
        debug: serve Go's profiles (net/http/pprof, /debug/pprof/) on ADDR,
        which must be a loopback address such as 127.0.0.1:6060. Off by
        default.
  -version, --version
        print the version, as xmq version does, and exit.
  -h, -help
        print this help and exit.

Environment:
  Every configuration key can be set by a variable: XMQ_ and the key's path
  in capitals, dots as underscores: broker.max_queued is
  XMQ_BROKER_MAX_QUEUED=5000. Values are written as in YAML (10s, true); a
  list of plain values is comma-separated; an entry of a list of sections is
  numbered from 0 (XMQ_LISTENERS_0_ADDRESS=:1884). The environment overrides
  the file, flags override both; xmq config env lists every variable and
  xmq.yaml(5) states the whole rule. An unknown XMQ_ variable that looks
  like a key is an error. XMQ_ADMIN_PASSWORD sets the dashboard admin's
  password. NOTIFY_SOCKET, set by systemd for a Type=notify service, is
  told when every listener accepts connections (READY=1) and when xmq
  stops (STOPPING=1).

Signals:
  SIGINT or SIGTERM shuts down gracefully (up to 10s for clients to go);
  SIGHUP reads the configuration file again (with the environment and flags
  of the start) and applies what can change live: the broker's limits
  (max_connections, max_keep_alive, max_session_expiry, connect_timeout,
  write_timeout, max_inflight, max_queued, max_queued_bytes, queue_overflow,
  max_subscriptions_per_client, max_message_rate, max_byte_rate,
  max_retained_messages, max_retained_bytes), log.level,
  auth.password_file and auth.acl_file, the TLS certificate files
  (tls.cert_file, key_file and each listener's) and the bridges; any other
  key that changed is logged as needing a restart. It also reloads the
  certificate files (checked every 10s too), the password file and the ACL
  file (checked every 2s). Connections stay up. POST /api/v1/reload does the
  same.
`)
}
