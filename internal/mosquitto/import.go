package mosquitto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/listeners"
)

// Import is an xmq configuration built from a Mosquitto one, with the
// comments that say where each key came from and what was left out.
type Import struct {
	src     string // the Mosquitto file, for the header
	version string // xmq's, for the header
	cfg     config.Config
	// lineComments and headComments hold the comments of the YAML keys at
	// a path such as "broker.max_queued" or "listeners[1].tls.verify";
	// every such key is kept in the output even when it equals xmq's
	// default, so the reader sees where each Mosquitto option went.
	lineComments map[string][]string
	headComments map[string][]string
	skipped      []skipped // for the header, in the order of the files
	sameAs       []skipped // lines that need no key: xmq behaves so already
	notes        []string  // differences that are no single line's
	carried      int
	includes     []string // the files include_dir read
	// fromListener is the index in cfg.Listeners of each Mosquitto
	// listener that was carried over.
	fromListener map[*mosqListenerConf]int
	bridgeNames  map[string]int // the index in cfg.Bridges of each bridge's name
}

// Convert converts mc, read from src, for xmq version (named in the
// header). It never fails: what it cannot carry over becomes a comment.
func Convert(mc *Conf, src, version string) *Import {
	im := &Import{src: src, version: version, cfg: config.Default(), lineComments: map[string][]string{}, headComments: map[string][]string{},
		fromListener: map[*mosqListenerConf]int{}, bridgeNames: map[string]int{}}
	im.cfg.Listeners = nil
	for _, l := range mc.unknown {
		if l.key == "" {
			im.skip(l, "not an option line: Mosquitto refuses this file")
		} else {
			im.skip(l, "not a Mosquitto 2.0 option (a typo, or an option of another version); its value is left out of this file, as it may be a secret")
		}
	}
	for _, f := range mc.foreign {
		im.skip(mosqLine{file: f}, "no line of this file is a Mosquitto option, and none is shown: include_dir reads every file "+
			"whose name ends in .conf, and Mosquitto refuses this one; is "+filepath.Dir(f)+" the directory you meant?")
	}
	for _, l := range mc.misplaced {
		im.skip(l, "a bridge option before any `connection` line: Mosquitto refuses this file")
	}
	im.includes = mc.includes
	im.globals(mc)
	im.listeners(mc)
	im.security(mc)
	im.bridges(mc.bridges)
	return im
}

// mapped records that line became the key at path.
func (im *Import) mapped(path string, l mosqLine, why string) {
	c := l.quoted()
	if why != "" {
		c += " (" + why + ")"
	}
	im.lineComments[path] = append(im.lineComments[path], c)
	im.carried++
}

// same records a line whose setting is xmq's behaviour without a key.
func (im *Import) same(l mosqLine, why string) {
	im.sameAs = append(im.sameAs, skipped{l, why})
	im.carried++
}

// skipped is a Mosquitto line that was not carried over, and why.
type skipped struct {
	line mosqLine
	why  string
}

// skip records that line has no xmq equivalent, and why.
func (im *Import) skip(l mosqLine, why string) {
	im.skipped = append(im.skipped, skipped{l, why})
}

// uint parses a non-negative integer option, or records why not.
func (im *Import) uint(l mosqLine) (int64, bool) {
	v, err := strconv.ParseInt(strings.Fields(l.value + " x")[0], 10, 64)
	if err != nil || v < 0 {
		im.skip(l, "not a non-negative number: Mosquitto refuses this line")
		return 0, false
	}
	return v, true
}

// boolean parses a boolean option, or records why not.
func (im *Import) boolean(l mosqLine) (bool, bool) {
	v, err := mosqBoolStrict(l.value)
	if err != nil {
		im.skip(l, "not true or false: Mosquitto refuses this line")
		return false, false
	}
	return v, true
}

// globals converts the options that apply to the whole broker.
func (im *Import) globals(mc *Conf) {
	b := &im.cfg.Broker
	// log_type may repeat: the most verbose type decides the level.
	var logTypes []mosqLine
	for _, l := range mc.globalOrder {
		switch l.key {
		case "log_type":
			logTypes = append(logTypes, l)
		case "log_dest":
			switch f := strings.Fields(l.value + " "); f[0] {
			case "stderr", "stdout":
				im.same(l, "standard error is xmq's output unless log.file, log.syslog or log.journald is set: one sentence per event on a terminal, JSON otherwise (log.format)")
			case "file":
				if len(f) < 2 {
					im.skip(l, "no file named: Mosquitto refuses this line")
					break
				}
				im.cfg.Log.File = f[1]
				im.mapped("log.file", l, "rotated at log.max_size_mb, which Mosquitto leaves to logrotate; nothing then goes to standard error")
			case "syslog":
				im.cfg.Log.Syslog = "local"
				im.mapped("log.syslog", l, "facility daemon, tag xmq")
			case "none":
				im.skip(l, "xmq always logs; log.level: error keeps only errors")
			default:
				im.skip(l, "xmq logs to standard error, a file, syslog or the systemd journal (log.journald), not to "+f[0])
			}
		}
	}
	if len(logTypes) > 0 {
		level, rank := "error", 0
		ranks := map[string]int{"none": 0, "error": 1, "warning": 2, "notice": 3, "information": 3, "subscribe": 3,
			"unsubscribe": 3, "websockets": 3, "debug": 4, "all": 4}
		names := map[int]string{0: "error", 1: "error", 2: "warn", 3: "info", 4: "debug"}
		for _, l := range logTypes {
			for _, t := range strings.Fields(l.value) {
				if r, ok := ranks[t]; ok && r > rank {
					rank = r
				}
			}
		}
		level = names[rank]
		im.cfg.Log.Level = level
		for i, l := range logTypes {
			why := ""
			if i == len(logTypes)-1 {
				why = "the most verbose log_type decides xmq's one level"
			}
			im.mapped("log.level", l, why)
		}
	}
	for _, key := range sortedKeys(mc.global) {
		l := mc.global[key]
		if why, ok := mosqGlobalNone[key]; ok {
			im.skip(l, why)
			continue
		}
		switch key {
		case "log_type", "log_dest":
			// above
		case "per_listener_settings":
			why := "listeners keep their own allow_anonymous; see auth below"
			if !mc.perListener {
				why = "one set of security options for every listener, as in xmq"
			}
			im.same(l, why)
		case "include_dir":
			im.same(l, "its files were read")
		case "max_inflight_messages":
			if v, ok := im.uint(l); ok {
				switch {
				case v == 0:
					b.MaxInflight = 65535
					im.mapped("broker.max_inflight", l, "0 is no limit in Mosquitto; 65535 is xmq's highest")
				case v > 65535:
					b.MaxInflight = 65535
					im.mapped("broker.max_inflight", l, "65535 is xmq's highest")
				default:
					b.MaxInflight = int(v)
					im.mapped("broker.max_inflight", l, "")
				}
			}
		case "max_queued_messages":
			if v, ok := im.uint(l); ok {
				if v == 0 {
					im.skip(l, "xmq bounds every queue (broker.max_queued, default 1000): raise it rather than drop the bound")
				} else {
					b.MaxQueued = int(min(v, math.MaxInt32))
					im.mapped("broker.max_queued", l, "")
				}
			}
		case "max_queued_bytes":
			if v, ok := im.uint(l); ok {
				b.MaxQueuedBytes = v
				im.mapped("broker.max_queued_bytes", l, "xmq counts topic and payload bytes, queued and in flight")
			}
		case "max_keepalive":
			if v, ok := im.uint(l); ok {
				b.MaxKeepAlive = uint16(min(v, 65535))
				im.mapped("broker.max_keep_alive", l, "")
			}
		case "max_packet_size":
			if v, ok := im.uint(l); ok {
				switch {
				case v == 0:
					b.MaxPacketSize = 268435460
					im.mapped("broker.max_packet_size", l, "0 is no limit: MQTT's largest packet")
				case v < 64:
					b.MaxPacketSize = 64
					im.mapped("broker.max_packet_size", l, "64 bytes is xmq's smallest")
				default:
					b.MaxPacketSize = int(min(v, 268435460))
					im.mapped("broker.max_packet_size", l, "")
				}
			}
		case "message_size_limit":
			if v, ok := im.uint(l); ok && v > 0 {
				if _, set := mc.global["max_packet_size"]; set {
					im.skip(l, "xmq limits whole packets only, and max_packet_size is set: it applies")
					continue
				}
				// The packet adds its fixed header, the topic, the packet
				// id and MQTT 5 properties to the payload.
				b.MaxPacketSize = int(min(v+64<<10, 268435460))
				im.mapped("broker.max_packet_size", l, "xmq limits the whole packet: the payload limit plus 64 KiB for topic and properties; a larger publish disconnects its client where Mosquitto dropped the message")
			} else if ok {
				im.same(l, "no payload limit besides broker.max_packet_size, as in xmq")
			}
		case "retain_available":
			if v, ok := im.boolean(l); ok {
				b.RetainDisabled = !v
				im.mapped("broker.retain_disabled", l, "")
			}
		case "sys_interval":
			if v, ok := im.uint(l); ok {
				if v == 0 {
					b.SysInterval = -time.Second
					im.mapped("broker.sys_interval", l, "0 turns $SYS off; in xmq a negative interval does")
				} else {
					b.SysInterval = time.Duration(v) * time.Second
					im.mapped("broker.sys_interval", l, "")
				}
			}
		case "persistent_client_expiration":
			d, err := mosqExpiration(l.value)
			if err != nil {
				im.skip(l, err.Error())
				continue
			}
			b.MaxSessionExpiry = uint32(min(d/time.Second, math.MaxUint32-1))
			im.mapped("broker.max_session_expiry", l, "caps the expiry MQTT 5 sessions ask for; an MQTT 3.1.1 persistent session never expires in xmq, as the MQTT 3.1.1 specification says: DELETE /api/v1/clients/{id} removes one")
		case "persistence", "retained_persistence":
			v, ok := im.boolean(l)
			if !ok {
				continue
			}
			if !v {
				im.cfg.DataDir = ""
				im.mapped("data_dir", l, `"" keeps sessions and retained messages in memory, as Mosquitto without persistence`)
				continue
			}
			im.mapped("data_dir", l, "xmq writes every acknowledged message to its store in <data_dir>/store; mosquitto.db is neither read nor changed, so sessions and retained messages start empty")
			if loc, ok := mc.global["persistence_location"]; ok && loc.value != "" {
				im.cfg.DataDir = strings.TrimRight(loc.value, "/")
				im.mapped("data_dir", loc, "")
			}
		case "persistence_location":
			if p, ok := mc.global["persistence"]; !ok || !mosqBool(p.value) {
				im.skip(l, "persistence is off: nothing is stored there")
			} // else mapped with persistence
		case "connection_messages":
			if v, ok := im.boolean(l); ok && !v {
				im.skip(l, "xmq logs every connect and disconnect at level info; log.level: warn hides them")
			} else if ok {
				im.same(l, "xmq logs every connect and disconnect too")
			}
		case "queue_qos0_messages":
			if v, ok := im.boolean(l); ok && v {
				im.skip(l, "xmq queues QoS 1 and 2 messages for offline sessions, not QoS 0, as MQTT specifies")
			} else if ok {
				im.same(l, "xmq does not queue QoS 0 messages for offline sessions either")
			}
		default:
			im.skip(l, "no equivalent in xmq")
		}
	}
	im.notes = append(im.notes, "a persistent session belongs to the user (or certificate) that made it: "+
		"another identity resuming its client id is refused, where Mosquitto lets any client take any client id over; "+
		"broker.session_owner_check: false restores Mosquitto's behaviour")
	if _, ok := mc.global["max_packet_size"]; !ok {
		if _, ok := mc.global["message_size_limit"]; !ok {
			im.notes = append(im.notes, "Mosquitto accepts packets up to 256 MiB unless max_packet_size says otherwise; "+
				"xmq's broker.max_packet_size defaults to 1 MiB: raise it if clients publish more")
		}
	}
}

// mosqGlobalNone are the global options with no xmq equivalent, and why.
var mosqGlobalNone = map[string]string{
	"persistence_file":         "xmq's store is a directory, <data_dir>/store, not one file",
	"autosave_interval":        "xmq has no snapshot to schedule: each acknowledged QoS 1/2 message is on disk before its acknowledgement (store.durability: sync; interval flushes every 100ms)",
	"autosave_on_changes":      "xmq has no snapshot to schedule: each acknowledged QoS 1/2 message is on disk before its acknowledgement (store.durability: sync; interval flushes every 100ms)",
	"allow_duplicate_messages": "deprecated in Mosquitto; xmq sends one copy to a client whose subscriptions overlap, at the highest QoS granted, always",
	"check_retain_source":      "xmq checks the subscriber's read access on every delivery, retained messages included; the publisher's current access is not checked again",
	"clientid_prefixes":        "deprecated in Mosquitto; xmq has no client id filter: ACL patterns with %c restrict what each client id may do",
	"log_facility":             "xmq's syslog output (log.syslog) uses facility daemon",
	"log_timestamp":            "xmq's log lines always carry an ISO 8601 time",
	"log_timestamp_format":     "xmq's log lines always carry an ISO 8601 time",
	"max_inflight_bytes":       "xmq bounds in-flight messages by count (broker.max_inflight) and queued bytes (broker.max_queued_bytes)",
	"memory_limit":             "xmq bounds memory per client (max_queued, max_queued_bytes, max_packet_size) and before login (pre_login_memory); broker.memory_limit (or GOMEMLIMIT) sets the Go runtime's soft limit, which is no hard limit",
	"pid_file":                 "xmq writes no pid file: systemd (Type=simple) or your supervisor tracks the process",
	"retry_interval":           "removed in Mosquitto 2; MQTT resends only on reconnect, as xmq does",
	"set_tcp_nodelay":          "xmq always sets TCP_NODELAY (Go's default) and batches its writes itself",
	"upgrade_outgoing_qos":     "not offered: MQTT forbids raising a message's QoS to the subscription's",
	"user":                     "xmq does not switch user: start it as an unprivileged account (systemd User=)",
	"websockets_headers_size":  "xmq's WebSocket listeners read up to 16 KiB of request headers (Mosquitto's default is 1 KiB); not configurable",
	"websockets_log_level":     "WebSocket errors are in xmq's own log, at its log.level",
}

// mosqListenerNone are the listener options with no xmq equivalent, and why.
var mosqListenerNone = map[string]string{
	"bind_interface":           "xmq binds to an address, not an interface: put the interface's address in this listener's address",
	"http_dir":                 "xmq's WebSocket listeners serve no files; its dashboard is on web.address",
	"max_qos":                  "not offered: xmq accepts QoS 0, 1 and 2 on every listener; an ACL cannot lower QoS either",
	"maximum_qos":              "not offered: xmq accepts QoS 0, 1 and 2 on every listener; an ACL cannot lower QoS either",
	"mount_point":              "not offered: xmq has one topic tree for every listener; ACL patterns with %u or %c can keep clients apart",
	"use_username_as_clientid": "not offered: xmq keeps the client id; broker.session_owner_check (on by default) already stops one user taking over another's session",
	"psk_hint":                 "TLS-PSK is not offered (Go's crypto/tls has no PSK; see docs/configuration.md): this listener keeps its certificate TLS only",
}

// mosqExpiration parses persistent_client_expiration: a count and h, d,
// w, m (30 days) or y (365 days), as Mosquitto does.
func mosqExpiration(v string) (time.Duration, error) {
	if len(v) < 2 {
		return 0, errors.New("want a number and h, d, w, m or y")
	}
	n, err := strconv.Atoi(v[:len(v)-1])
	if err != nil || n <= 0 {
		return 0, errors.New("want a number and h, d, w, m or y")
	}
	unit := map[byte]time.Duration{'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
		'm': 30 * 24 * time.Hour, 'y': 365 * 24 * time.Hour}[v[len(v)-1]]
	if unit == 0 {
		return 0, errors.New("want a number and h, d, w, m or y")
	}
	return time.Duration(n) * unit, nil
}

// listeners converts the listeners, the default listener first when
// Mosquitto would start it.
func (im *Import) listeners(mc *Conf) {
	all := mc.listeners
	if mosqDefaultListenerUsed(&mc.def) {
		all = append([]*mosqListenerConf{&mc.def}, all...)
	}
	names := map[string]int{}
	for _, ml := range all {
		im.listener(mc, ml, names)
	}
	if len(all) == 0 && mc.localOnly {
		im.cfg.Listeners = append(im.cfg.Listeners, config.Listener{Name: "tcp", Transport: listeners.TransportTCP,
			Address: "127.0.0.1:1883"})
		im.headComments["listeners[0]"] = []string{"Mosquitto 2 with no listener configured listens on the loopback interface only (127.0.0.1 and ::1, port 1883) and lets anonymous clients in"}
		im.cfg.Auth.AllowAnonymous = auth.AnonymousAllow
		im.lineComments["auth.allow_anonymous"] = append(im.lineComments["auth.allow_anonymous"], "Mosquitto's local-only mode: anonymous clients, from this machine only")
	}
	if len(im.cfg.Listeners) == 0 {
		// Nothing Mosquitto would serve converts: keep a loopback TCP
		// listener so that the file still loads, and say so.
		im.cfg.Listeners = []config.Listener{{Name: "tcp", Transport: listeners.TransportTCP, Address: "127.0.0.1:1883"}}
		im.headComments["listeners[0]"] = []string{"none of Mosquitto's listeners converts (see the list at the top): a loopback TCP listener so that this file loads"}
	}
}

// mosqDefaultListenerUsed reports whether Mosquitto starts its default
// listener: when any of its options was set (src/conf.c).
func mosqDefaultListenerUsed(def *mosqListenerConf) bool {
	return len(def.opts) > 0 || len(def.sec.opts) > 0 || len(def.sec.other) > 0
}

// listener converts one Mosquitto listener, or says why it cannot.
func (im *Import) listener(mc *Conf, ml *mosqListenerConf, names map[string]int) {
	opt := ml.opt
	port, host := "1883", ""
	var at mosqLine
	var bind *mosqLine // bind_address besides port
	if ml.at != nil {
		at = *ml.at
		f := strings.Fields(at.value)
		if len(f) == 0 {
			im.skip(at, "no port: Mosquitto refuses this line")
			im.skipListenerOptions(ml, "its listener line is invalid")
			return
		}
		port = f[0]
		if len(f) > 1 && !strings.HasPrefix(f[1], "#") {
			host = f[1]
		}
		if port == "0" {
			im.skip(at, "Unix domain sockets are not offered: xmq listens on TCP, UDP (QUIC) and WebSocket")
			im.skipListenerOptions(ml, "its listener (a Unix socket) is not carried over")
			return
		}
	} else {
		if l, ok := opt("port"); ok {
			port, at = l.value, l
		}
		if l, ok := opt("bind_address"); ok {
			host = l.value
			if at.key == "" {
				at = l
			} else {
				bind = &l
			}
		}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		if at.key != "" {
			im.skip(at, "not a port number: Mosquitto refuses this line")
		}
		im.skipListenerOptions(ml, "its port is invalid")
		return
	}
	cert, hasCert := opt("certfile")
	key, hasKey := opt("keyfile")
	_, psk := opt("psk_hint")
	proto := "mqtt"
	if l, ok := opt("protocol"); ok {
		proto = l.value
	}
	if psk && !hasCert {
		im.skip(at, "a TLS-PSK listener: xmq does not offer TLS-PSK (Go's crypto/tls has no PSK; see docs/configuration.md), and serving this port without TLS would expose it: not carried over")
		im.skipListenerOptions(ml, "its listener (TLS-PSK) is not carried over")
		return
	}
	if hasCert != hasKey {
		im.skip(at, "certfile and keyfile go together: Mosquitto refuses this listener")
		im.skipListenerOptions(ml, "its listener is invalid")
		return
	}
	var transport string
	switch proto {
	case "mqtt":
		transport = listeners.TransportTCP
		if hasCert {
			transport = listeners.TransportTLS
		}
	case "websockets":
		transport = listeners.TransportWS
		if hasCert {
			transport = listeners.TransportWSS
		}
	default:
		im.skip(at, fmt.Sprintf("protocol %s is not offered: xmq speaks MQTT over TCP, TLS, WebSocket and QUIC", proto))
		im.skipListenerOptions(ml, "its listener is not carried over")
		return
	}
	i := len(im.cfg.Listeners)
	path := fmt.Sprintf("listeners[%d]", i)
	name := transport + "-" + port
	if names[name]++; names[name] > 1 {
		name += "-" + strconv.Itoa(names[name])
	}
	lc := config.Listener{Name: name, Transport: transport}
	if proto == "websockets" {
		// Mosquitto answers MQTT over WebSocket on every path; its
		// clients dial "/", "/mqtt" or anything else.
		lc.Path = listeners.AnyPath
	}
	if at.key != "" {
		im.mapped(path+".address", at, "")
	}
	if bind != nil {
		im.mapped(path+".address", *bind, "")
	}
	if host == "" {
		lc.Address = ":" + port
		if l, ok := opt("socket_domain"); ok && l.value == "ipv4" {
			lc.Address = "0.0.0.0:" + port
			im.mapped(path+".address", l, "IPv4 only")
		} else if ok {
			im.mapped(path+".address", l, "Go listens on IPv6 and IPv4 at once")
		}
	} else {
		lc.Address = net.JoinHostPort(host, port)
		if l, ok := opt("socket_domain"); ok {
			im.mapped(path+".address", l, "the bind address decides the IP version")
		}
	}
	if ml.at == nil {
		im.headComments[path] = append(im.headComments[path], "Mosquitto's default listener: the options before the first `listener` line")
	}
	if l, ok := opt("protocol"); ok {
		im.mapped(path+".transport", l, "")
		if proto == "websockets" {
			im.lineComments[path+".path"] = append(im.lineComments[path+".path"],
				"every path, as Mosquitto: its clients may dial / or /mqtt")
		}
	}
	if hasCert {
		lc.TLS.CertFile, lc.TLS.KeyFile = cert.value, key.value
		im.mapped(path+".tls.cert_file", cert, "")
		im.mapped(path+".tls.key_file", key, "")
	}
	im.cfg.Listeners = append(im.cfg.Listeners, lc)
	im.fromListener[ml] = i
	l := &im.cfg.Listeners[i]
	for _, k := range ml.order {
		line := ml.opts[k]
		if why, ok := mosqListenerNone[k]; ok {
			im.skip(line, why)
			continue
		}
		switch k {
		case "listener", "port", "bind_address", "protocol", "certfile", "keyfile", "socket_domain":
			// above
		case "max_connections":
			v, err := strconv.Atoi(line.value)
			switch {
			case err != nil:
				im.skip(line, "not a number: Mosquitto refuses this line")
			case v < 0:
				im.mapped(path+".max_connections", line, "-1 is no limit; in xmq 0 is")
			default:
				l.MaxConnections = v
				im.mapped(path+".max_connections", line, "")
			}
		case "max_topic_alias":
			im.topicAlias(line)
		default:
			if !hasCert {
				im.skip(line, "a TLS option on a listener without certfile: Mosquitto serves it without TLS too")
				continue
			}
			im.listenerTLS(path, l, ml, line)
		}
	}
}

// listenerTLS converts a TLS option of a listener that has certfile.
func (im *Import) listenerTLS(path string, l *config.Listener, ml *mosqListenerConf, line mosqLine) {
	t := &l.TLS
	switch line.key {
	case "cafile":
		t.ClientCAFile = line.value
		im.mapped(path+".tls.client_ca_file", line, "CAs of client certificates")
	case "capath":
		if _, ok := ml.opt("cafile"); ok {
			im.skip(line, "xmq reads one PEM bundle (client_ca_file, from cafile here); add the directory's certificates to it")
		} else {
			im.skip(line, "xmq reads one PEM bundle: cat the directory's certificates into one file and name it in tls.client_ca_file")
		}
	case "require_certificate":
		if v, ok := im.boolean(line); ok {
			if v {
				t.Verify = "required"
			} else {
				t.Verify = "none"
			}
			im.mapped(path+".tls.verify", line, "")
		}
	case "use_identity_as_username":
		if v, ok := im.boolean(line); ok && v {
			if t.Verify != "required" {
				t.Verify = "required"
				im.lineComments[path+".tls.verify"] = append(im.lineComments[path+".tls.verify"],
					"use_identity_as_username needs a verified client certificate")
			}
			t.IdentityAsUsername = "cn"
			im.mapped(path+".tls.identity_as_username", line, "the certificate's common name is the user name")
		} else if ok {
			im.same(line, "xmq takes the user name from CONNECT too")
		}
	case "use_subject_as_username":
		if v, ok := im.boolean(line); ok && v {
			im.skip(line, "xmq takes the user name from the certificate's common name (identity_as_username: cn) or first SAN (san), not the whole subject: set one and rewrite the password and ACL entries that name subjects")
		} else if ok {
			im.same(line, "xmq takes the user name from CONNECT too")
		}
	case "crlfile":
		t.ClientCRLFile = line.value
		im.mapped(path+".tls.client_crl_file", line, "")
	case "tls_version":
		switch line.value {
		case "tlsv1.3":
			t.MinVersion = "1.3"
			im.mapped(path+".tls.min_version", line, "")
		case "tlsv1.2":
			t.MinVersion = "1.2"
			im.mapped(path+".tls.min_version", line, "")
		default:
			im.skip(line, "xmq's oldest TLS version is 1.2 (RFC 8996 deprecates 1.0 and 1.1)")
		}
	case "ciphers":
		suites, rest := openSSLCiphers(line.value)
		if _, err := certs.CipherSuites(suites); err != nil || len(suites) == 0 || t.MinVersion == "1.3" || l.Transport == listeners.TransportQUIC {
			im.skip(line, "no OpenSSL cipher string converts as a whole: xmq names Go's TLS 1.2 suites in tls.cipher_suites, and its defaults are secure")
			return
		}
		t.CipherSuites = suites
		why := "OpenSSL's names as Go's"
		if len(rest) > 0 {
			why += "; dropped: " + strings.Join(rest, ":")
		}
		im.mapped(path+".tls.cipher_suites", line, why)
	case "ciphers_tls1.3":
		im.skip(line, "TLS 1.3 suites are not configurable in Go: all three are offered, all secure")
	case "dhparamfile":
		im.skip(line, "Go's TLS uses elliptic-curve key exchange (ECDHE), never finite-field DH: no parameters needed")
	case "tls_engine", "tls_engine_kpass_sha1", "tls_keyform":
		im.skip(line, "OpenSSL engines (hardware keys) are not offered: the key is a PEM file")
	default:
		im.skip(line, "no equivalent in xmq")
	}
}

// skipListenerOptions lists the options of a listener that is not
// carried over.
func (im *Import) skipListenerOptions(ml *mosqListenerConf, why string) {
	for _, k := range ml.order {
		if k != "listener" {
			im.skip(ml.opts[k], why)
		}
	}
	for _, k := range sortedKeys(ml.sec.opts) {
		im.skip(ml.sec.opts[k], why)
	}
	for _, l := range ml.sec.other {
		im.skip(l, why)
	}
}

// topicAlias converts max_topic_alias, a listener option in Mosquitto and
// one broker setting in xmq: the first value wins.
func (im *Import) topicAlias(line mosqLine) {
	v, err := strconv.Atoi(line.value)
	switch {
	case err != nil || v < 0 || v > 65535:
		im.skip(line, "not a number from 0 to 65535: Mosquitto refuses this line")
	case v == 0:
		im.skip(line, "xmq always lets clients use topic aliases (broker.topic_alias_maximum, default 64)")
	case im.cfg.Broker.TopicAliasMaximum != 0 && int(im.cfg.Broker.TopicAliasMaximum) != v:
		im.skip(line, fmt.Sprintf("xmq has one topic_alias_maximum for every listener: %d, from an earlier listener, applies", im.cfg.Broker.TopicAliasMaximum))
	default:
		im.cfg.Broker.TopicAliasMaximum = uint16(v)
		im.mapped("broker.topic_alias_maximum", line, "one value for every listener in xmq")
	}
}

// openSSLCiphers maps an OpenSSL cipher list to Go's names of the same
// TLS 1.2 suites; rest are the entries with no such name (keywords such as
// HIGH or !aNULL, suites Go does not offer).
func openSSLCiphers(list string) (suites, rest []string) {
	names := map[string]string{
		"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
		"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
		"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
		"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
		"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
		"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
		"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
		"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	}
	for _, c := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		if n, ok := names[c]; ok {
			if _, err := certs.CipherSuites([]string{n}); err == nil && !slices.Contains(suites, n) {
				suites = append(suites, n)
				continue
			}
		}
		rest = append(rest, c)
	}
	return suites, rest
}

// security converts password_file, acl_file, allow_anonymous and the
// other security options: global, or per listener with
// per_listener_settings true, where xmq keeps per-listener
// allow_anonymous but has one password file and one ACL file.
func (im *Import) security(mc *Conf) {
	a := &im.cfg.Auth
	if !mc.perListener {
		s := &mc.security
		if l, ok := s.opt("allow_anonymous"); ok {
			if v, ok := im.boolean(l); ok {
				a.AllowAnonymous = anonymous(v)
				im.mapped("auth.allow_anonymous", l, "")
			}
		} else if !mc.localOnly || len(mc.listeners) > 0 || mosqDefaultListenerUsed(&mc.def) {
			a.AllowAnonymous = auth.AnonymousDeny
			im.lineComments["auth.allow_anonymous"] = append(im.lineComments["auth.allow_anonymous"],
				"Mosquitto 2's default with listeners configured; xmq's own default is loopback (anonymous from this machine only)")
		}
		if l, ok := s.opt("password_file"); ok {
			a.PasswordFile = l.value
			im.mapped("auth.password_file", l, "xmq reads Mosquitto's $7$ and $6$ hashes; xmq passwd keeps writing $7$ there")
		}
		if l, ok := s.opt("acl_file"); ok {
			a.ACLFile = l.value
			im.mapped("auth.acl_file", l, "Mosquitto's syntax, with %c and %u")
		}
		im.securityOther(s)
		return
	}

	// per_listener_settings true.
	for _, k := range sortedKeys(mc.security.opts) { // before it was set
		im.skip(mc.security.opts[k], "set before per_listener_settings true: Mosquitto refuses this file")
	}
	a.AllowAnonymous = auth.AnonymousDeny
	im.lineComments["auth.allow_anonymous"] = append(im.lineComments["auth.allow_anonymous"],
		"per_listener_settings: each listener says allow_anonymous itself")
	all := mc.listeners
	if mosqDefaultListenerUsed(&mc.def) {
		all = append([]*mosqListenerConf{&mc.def}, all...)
	}
	files := map[string][]mosqLine{} // option → its lines, in listener order
	byListener := map[string]map[int]string{"password_file": {}, "acl_file": {}}
	for _, ml := range all {
		i, ok := im.fromListener[ml]
		if !ok {
			continue // not carried over: skipListenerOptions listed its lines
		}
		path := fmt.Sprintf("listeners[%d]", i)
		lc := &im.cfg.Listeners[i]
		if l, ok := ml.sec.opt("allow_anonymous"); ok {
			if v, ok := im.boolean(l); ok {
				lc.AllowAnonymous = anonymous(v)
				im.mapped(path+".allow_anonymous", l, "")
			}
		} else {
			lc.AllowAnonymous = auth.AnonymousDeny
			im.lineComments[path+".allow_anonymous"] = append(im.lineComments[path+".allow_anonymous"], "Mosquitto 2's default")
		}
		for _, key := range []string{"password_file", "acl_file"} {
			if l, ok := ml.sec.opt(key); ok {
				byListener[key][i] = l.value
				files[key] = append(files[key], l)
			}
		}
		im.securityOther(&ml.sec)
	}
	for _, key := range []string{"password_file", "acl_file"} {
		lines := files[key]
		if len(lines) == 0 {
			continue
		}
		xmqKey := "auth." + key
		chosen := lines[0].value
		if key == "password_file" {
			a.PasswordFile = chosen
		} else {
			a.ACLFile = chosen
		}
		for _, l := range lines {
			why := ""
			if l.value != chosen {
				why = "not used: xmq has one " + key + " for every listener"
			}
			im.mapped(xmqKey, l, why)
		}
		var without, other []string
		for i, lc := range im.cfg.Listeners {
			switch v, ok := byListener[key][i]; {
			case !ok:
				without = append(without, lc.Name)
			case v != chosen:
				other = append(other, lc.Name+" ("+v+")")
			}
		}
		if len(other) > 0 || len(without) > 0 {
			c := "per_listener_settings: xmq has one " + key + " for every listener, this one"
			if len(other) > 0 {
				c += "; listeners " + strings.Join(other, ", ") + " had another: merge them into this file"
			}
			if len(without) > 0 {
				c += "; listeners " + strings.Join(without, ", ") + " had none and now use it too"
			}
			im.lineComments[xmqKey] = append(im.lineComments[xmqKey], c)
		}
	}
}

// securityOther converts the security options besides the files and
// allow_anonymous of one scope.
func (im *Import) securityOther(s *mosqSecurityConf) {
	if l, ok := s.opt("psk_file"); ok {
		im.skip(l, "TLS-PSK is not offered (Go's crypto/tls has no PSK; see docs/configuration.md): give these clients certificates or passwords")
	}
	if l, ok := s.opt("allow_zero_length_clientid"); ok {
		if v, ok := im.boolean(l); ok && !v {
			im.skip(l, "xmq always assigns a client id to a client that sends none, as MQTT 3.1.1 and 5 allow")
		} else if ok {
			im.same(l, "xmq assigns a client id to a client that sends none too")
		}
	}
	if l, ok := s.opt("auto_id_prefix"); ok {
		im.skip(l, "xmq's assigned client ids have a fixed form")
	}
	for _, l := range s.other {
		switch {
		case l.key == "auth_plugin" || l.key == "plugin":
			im.skip(l, "xmq loads no plugins: authentication is the password file (with SCRAM), certificates and the ACL file; `xmq import -dynsec FILE -passwd FILE -acl FILE` converts the dynamic security plugin's file (its plugin_opt_config_file) into them")
		case l.key == "auth_plugin_deny_special_chars":
			im.skip(l, "no plugins; xmq's ACL patterns never match a %u or %c that contains + or #")
		default:
			im.skip(l, "an option of a plugin, which xmq does not load")
		}
	}
}

func anonymous(v bool) auth.Anonymous {
	if v {
		return auth.AnonymousAllow
	}
	return auth.AnonymousDeny
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Render writes the configuration as YAML to w: the config struct
// encoded, the keys equal to xmq's defaults left out unless a Mosquitto
// option names them, a line comment on each key saying where it came from
// and a header listing what was not carried over. It writes a bounded part
// at a time (yamlWriter), so that a large configuration costs memory in
// proportion to its own size only.
func (im *Import) Render(w io.Writer) error { return im.renderParts(w, yamlChunk) }

// renderParts is render with at most chunk list items per part.
func (im *Import) renderParts(w io.Writer, chunk int) error {
	var def yaml.Node
	if err := def.Encode(config.Default()); err != nil {
		return err
	}
	// The files in the order they were read, then the lines.
	fileOrder := map[string]int{}
	for _, s := range slices.Concat([]skipped{{line: mosqLine{file: im.src}}}, im.skipped, im.sameAs) {
		if _, ok := fileOrder[s.line.file]; !ok {
			fileOrder[s.line.file] = len(fileOrder)
		}
	}
	byPlace := func(a, b skipped) int {
		if c := fileOrder[a.line.file] - fileOrder[b.line.file]; c != 0 {
			return c
		}
		return a.line.n - b.line.n
	}
	slices.SortStableFunc(im.skipped, byPlace)
	slices.SortStableFunc(im.sameAs, byPlace)
	keep := map[string]bool{}
	for _, m := range []map[string][]string{im.lineComments, im.headComments} {
		for p := range m {
			for q := p; q != ""; q = parentPath(q) {
				keep[q] = true
			}
		}
	}
	bw := bufio.NewWriter(w)
	im.header(bw)
	y := &yamlWriter{w: bw, chunk: chunk, keep: keep, line: im.lineComments, head: im.headComments, used: map[string]bool{}}
	if err := y.value(reflect.ValueOf(im.cfg), &def, "", ""); err != nil {
		return err
	}
	// A comment whose key is not in the output is import.go's mistake;
	// it shows only once the parts are written.
	for _, m := range []map[string][]string{im.lineComments, im.headComments} {
		for _, p := range sortedKeys(m) {
			if !y.used[p] {
				return fmt.Errorf("no key %s in the configuration (import.go names it)", p)
			}
		}
	}
	return bw.Flush()
}

// header writes the comment block at the top of the output.
func (im *Import) header(b *bufio.Writer) {
	line := func(s string) {
		if s == "" {
			b.WriteString("#\n")
			return
		}
		b.WriteString("# " + s + "\n")
	}
	line(fmt.Sprintf("xmq configuration converted from %s by `xmq import` (xmq %s).", im.src, im.version))
	if len(im.includes) > 0 {
		wrapComment(b, "", "  ", "With the files of its include_dir: "+strings.Join(im.includes, ", "))
	}
	line("")
	line("Each key with a comment comes from the Mosquitto line it names; the keys left out keep")
	line("xmq's defaults (xmq.example.yaml lists them all). Password and ACL files are used as they")
	line("are. Start xmq with: xmq -c THIS_FILE. docs/migrating-from-mosquitto.md covers every option.")
	line("xmq also serves a dashboard and admin API on 127.0.0.1:18083 (web.address: \"\" turns it off).")
	if len(im.notes) > 0 {
		line("")
		line("Differences to know:")
		for _, n := range im.notes {
			wrapComment(b, "  - ", "    ", n)
		}
	}
	if len(im.sameAs) > 0 {
		line("")
		line("Carried over without a key (xmq behaves so already):")
		for _, s := range im.sameAs {
			wrapComment(b, "  ", "      ", s.line.quoted()+": "+s.why)
		}
	}
	if len(im.skipped) > 0 {
		line("")
		line(fmt.Sprintf("Not carried over (%d), and why:", len(im.skipped)))
		for _, s := range im.skipped {
			line("")
			line("  " + s.line.quoted())
			wrapComment(b, "    ", "    ", s.why)
		}
	}
	b.WriteString("\n")
}

// wrapComment writes text as comment lines of at most about 100 columns.
func wrapComment(b *bufio.Writer, first, rest, text string) {
	prefix := first
	cur := ""
	for _, w := range strings.Fields(text) {
		if cur != "" && len(prefix)+len(cur)+1+len(w) > 98 {
			b.WriteString("# " + prefix + cur + "\n")
			prefix, cur = rest, ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	b.WriteString("# " + prefix + cur + "\n")
}

// wrapLines joins comments into lines of about 90 columns, for a head
// comment (the encoder adds "# " and the indentation).
func wrapLines(cs []string) string {
	var out []string
	for _, c := range cs {
		cur := ""
		for _, w := range strings.Fields(c) {
			if cur != "" && len(cur)+1+len(w) > 88 {
				out = append(out, cur)
				cur = "  "
			}
			if cur != "" && cur != "  " {
				cur += " "
			}
			cur += w
		}
		out = append(out, cur)
	}
	return strings.Join(out, "\n")
}

// parentPath is "a.b" for "a.b.c" and "listeners" for "listeners[2]".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		return p[:strings.LastIndex(p, "[")]
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

// pruneNode drops from the mapping n the keys equal to their default in
// def (or empty, in a list item, which has no default) unless keep names
// them or something below them.
func pruneNode(n, def *yaml.Node, path string, keep map[string]bool) {
	if n.Kind != yaml.MappingNode {
		return
	}
	out := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		var dv *yaml.Node
		if def != nil {
			for j := 0; j+1 < len(def.Content); j += 2 {
				if def.Content[j].Value == k.Value {
					dv = def.Content[j+1]
				}
			}
		}
		switch v.Kind {
		case yaml.MappingNode:
			pruneNode(v, dv, p, keep)
			if len(v.Content) == 0 && !keep[p] {
				continue
			}
		case yaml.SequenceNode:
			if len(v.Content) > 0 && v.Content[0].Kind == yaml.MappingNode {
				// Listeners, bridges and their topics: an item has no
				// default, its empty keys go.
				for j, item := range v.Content {
					pruneNode(item, nil, fmt.Sprintf("%s[%d]", p, j), keep)
				}
			} else if !keep[p] && (dv != nil && sameNode(v, dv) || dv == nil && len(v.Content) == 0) {
				continue
			}
		default:
			if !keep[p] && (dv != nil && sameNode(v, dv) || dv == nil && isZeroScalar(v)) {
				continue
			}
		}
		out = append(out, k, v)
	}
	n.Content = out
}

func sameNode(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Value != b.Value || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !sameNode(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

func isZeroScalar(n *yaml.Node) bool {
	switch n.Value {
	case "", "0", "false", "null", "0s":
		return true
	}
	return false
}

// Carried is the number of Mosquitto option lines that became xmq keys.
func (im *Import) Carried() int { return im.carried }

// Skipped is the number of Mosquitto option lines that did not, each with
// a comment in the output saying why.
func (im *Import) Skipped() int { return len(im.skipped) }

// Config is the configuration the import built, as Render writes it.
func (im *Import) Config() config.Config { return im.cfg }
