package mosquitto

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/internal/config"
)

// bridges converts the `connection` sections into bridges, each line to
// its key or to why it has none. A bridge that would not run (no address,
// no topic) is not carried over, and says why.
func (im *Import) bridges(bs []*mosqBridgeConf) {
	for _, b := range bs {
		im.bridge(b)
	}
}

// bridgeLine is what became of one line of a bridge, recorded once the
// bridge is known to be valid.
type bridgeLine struct {
	l    mosqLine
	key  string // the key below bridges[i]; "" when not carried over
	same bool   // xmq does so without a key
	why  string
}

func (im *Import) bridge(b *mosqBridgeConf) {
	name := bridgeName(b.name.value)
	bc := config.Bridge{Name: name, Protocol: bridge.ProtocolV311} // Mosquitto's default version
	var done []bridgeLine
	mapped := func(l mosqLine, key, why string) { done = append(done, bridgeLine{l: l, key: key, why: why}) }
	skip := func(l mosqLine, why string) { done = append(done, bridgeLine{l: l, why: why}) }
	same := func(l mosqLine, why string) { done = append(done, bridgeLine{l: l, same: true, why: why}) }
	nameWhy := ""
	if name != b.name.value {
		nameWhy = "xmq's bridge names are letters, digits, '.', '-' and '_'"
	}
	mapped(b.name, "name", nameWhy)
	scheme := "mqtt"
	for _, l := range b.lines {
		if l.key == "bridge_cafile" || l.key == "bridge_capath" || l.key == "bridge_certfile" {
			scheme = "mqtts" // Mosquitto's bridge uses TLS once it has a CA or a certificate
		}
	}
	protocolSet := false
	for _, l := range b.lines {
		switch l.key {
		case "address", "addresses":
			for _, a := range strings.Fields(l.value) {
				host, port, err := net.SplitHostPort(a)
				if err != nil {
					host, port = a, "1883" // Mosquitto's bridges default to 1883, with TLS too
				}
				bc.Addresses = append(bc.Addresses, scheme+"://"+net.JoinHostPort(host, port))
			}
			mapped(l, "addresses", "tried in turn, as Mosquitto's")
		case "topic":
			r, err := mosqTopicRule(l.value)
			if err != nil {
				skip(l, err.Error())
				continue
			}
			bc.Topics = append(bc.Topics, r)
			mapped(l, "topics", "")
		case "bridge_protocol_version":
			protocolSet = true
			switch l.value {
			case "mqttv50":
				bc.Protocol = bridge.ProtocolV5
				mapped(l, "protocol", "")
			case "mqttv311":
				mapped(l, "protocol", "")
			case "mqttv31":
				mapped(l, "protocol", "xmq's bridges speak MQTT 3.1.1 or 5, and a 3.1 broker is rare")
			default:
				skip(l, "not mqttv31, mqttv311 or mqttv50: Mosquitto refuses this line")
			}
		case "remote_clientid", "clientid":
			bc.ClientID = l.value
			mapped(l, "client_id", "")
		case "remote_username", "username":
			bc.Username = l.value
			mapped(l, "username", "")
		case "remote_password", "password":
			bc.Password = l.value
			mapped(l, "password", "")
		case "bridge_cafile":
			bc.TLS.CAFile = l.value
			mapped(l, "tls.ca_file", "")
		case "bridge_certfile":
			bc.TLS.CertFile = l.value
			mapped(l, "tls.cert_file", "")
		case "bridge_keyfile":
			bc.TLS.KeyFile = l.value
			mapped(l, "tls.key_file", "")
		case "bridge_capath":
			skip(l, "xmq reads the remote's CAs from one file: concatenate the directory's certificates into tls.ca_file (without either, the system's roots verify the remote)")
		case "bridge_insecure":
			if v, ok := im.boolean(l); ok && !v {
				same(l, "xmq always checks that the remote's certificate names it")
			} else if ok {
				skip(l, "xmq always checks the remote's name: tls.server_name checks another name than the address's")
			}
		case "bridge_identity", "bridge_psk":
			skip(l, "TLS-PSK is not offered: a certificate (tls.ca_file) or the system's roots verify the remote")
		case "bridge_alpn":
			skip(l, "xmq sets the ALPN protocols each transport needs")
		case "bridge_tls_version":
			if l.value == "tlsv1.2" || l.value == "tlsv1.3" {
				same(l, "xmq's bridges use TLS 1.2 or later")
			} else {
				skip(l, "xmq's bridges use TLS 1.2 or later")
			}
		case "bridge_require_ocsp":
			skip(l, "OCSP stapling is not checked")
		case "bridge_bind_address":
			skip(l, "the operating system picks the source address")
		case "bridge_attempt_unsubscribe":
			same(l, "a reload that drops a rule unsubscribes its filter at the remote")
		case "bridge_max_packet_size":
			skip(l, "xmq announces broker.max_packet_size to the remote and honours an MQTT 5 remote's Maximum Packet Size")
		case "bridge_outgoing_retain":
			if v, ok := im.boolean(l); ok && v {
				same(l, "retain flags go as published")
			} else if ok {
				skip(l, "xmq forwards retain flags as published")
			}
		case "cleansession":
			if v, ok := im.boolean(l); ok {
				bc.CleanStart = v
				mapped(l, "clean_start", "")
			}
		case "local_cleansession":
			skip(l, "the bridge's local session is always persistent: its queue holds what waits for the remote")
		case "local_clientid", "local_username", "local_password":
			skip(l, "the bridge's local session is $bridge:NAME, a name reserved to it")
		case "keepalive_interval":
			if v, ok := im.uint(l); ok && v > 0 && v <= 65535 {
				bc.KeepAlive = time.Duration(v) * time.Second
				mapped(l, "keepalive", "")
			} else if ok {
				skip(l, "xmq's bridges keep alive, from 1 to 65535 seconds")
			}
		case "idle_timeout", "threshold":
			skip(l, "start_type lazy is not offered: the bridge stays connected")
		case "notifications", "notification_topic", "notifications_local_only":
			skip(l, "the bridge's state is in /metrics (xmq_bridge_connected …) and GET /api/v1/bridges, not in a topic")
		case "restart_timeout":
			f := strings.Fields(l.value + " x")
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := lo, error(nil)
			if len(f) > 2 {
				hi, err2 = strconv.Atoi(f[1])
			}
			if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
				skip(l, "not BASE or BASE CAP, in seconds: the default backoff applies")
				continue
			}
			bc.BackoffMin, bc.BackoffMax = time.Duration(lo)*time.Second, time.Duration(hi)*time.Second
			mapped(l, "backoff_min", "backoff_max too: the wait doubles from the first to the second, with jitter")
		case "round_robin":
			skip(l, "xmq tries the addresses in order at each reconnection and stays on the one it reached")
		case "start_type":
			switch l.value {
			case "automatic":
				same(l, "a bridge starts with the broker")
			case "manual":
				f := false
				bc.Enabled = &f
				mapped(l, "enabled", "POST /api/v1/bridges/NAME/start starts it")
			default:
				skip(l, "lazy and once are not offered: the bridge starts with the broker and stays connected")
			}
		case "try_private":
			if v, ok := im.boolean(l); ok {
				bc.TryPrivate = &v
				mapped(l, "try_private", "")
			}
		default:
			skip(l, "an option of bridge "+b.name.value+" that xmq does not know")
		}
	}
	// The bridges carried over so far are valid and their names distinct:
	// checking this one alone, with the earlier one of its name if any,
	// is what checking them all would say, in time linear in the file.
	check := []config.Bridge{bc}
	if j, dup := im.bridgeNames[name]; dup {
		check = []config.Bridge{im.cfg.Bridges[j], bc}
	}
	if err := bridge.ValidateAll((&config.Config{Bridges: check}).BridgeConfigs()); err != nil {
		im.skip(b.name, "this bridge is not carried over: "+err.Error())
		for _, d := range done[1:] {
			im.skip(d.l, "an option of bridge "+b.name.value+", which is not carried over")
		}
		return
	}
	i := len(im.cfg.Bridges)
	im.cfg.Bridges = append(im.cfg.Bridges, bc)
	im.bridgeNames[name] = i
	for _, d := range done {
		switch {
		case d.key != "":
			im.mapped(fmt.Sprintf("bridges[%d].%s", i, d.key), d.l, d.why)
		case d.same:
			im.same(d.l, d.why)
		default:
			im.skip(d.l, d.why)
		}
	}
	if !protocolSet {
		im.notes = append(im.notes, "bridge "+name+" speaks MQTT 3.1.1, Mosquitto's default for bridges (xmq's is 5: set protocol: \"5\" if the remote speaks it)")
	}
}

// bridgeName makes a Mosquitto connection name a valid bridge name.
func bridgeName(n string) string {
	b := []byte(n)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "bridge"
	}
	return string(b[:min(len(b), 64)])
}

// mosqTopicRule parses the value of a bridge `topic` line: PATTERN
// [out|in|both [QOS [LOCAL_PREFIX REMOTE_PREFIX]]], where "" is empty.
func mosqTopicRule(v string) (config.BridgeTopicRule, error) {
	f := strings.Fields(v)
	for i := range f {
		if f[i] == `""` {
			f[i] = ""
		}
	}
	r := config.BridgeTopicRule{Direction: string(bridge.Out)}
	switch {
	case len(f) == 0:
		return r, fmt.Errorf("no topic pattern: Mosquitto refuses this line")
	case len(f) == 4 || len(f) > 5:
		return r, fmt.Errorf("want PATTERN [DIRECTION [QOS [LOCAL_PREFIX REMOTE_PREFIX]]]: Mosquitto refuses this line")
	}
	r.Topic = f[0]
	if len(f) > 1 {
		r.Direction = f[1]
	}
	if len(f) > 2 {
		q, err := strconv.Atoi(f[2])
		if err != nil || q < 0 || q > 2 {
			return r, fmt.Errorf("QoS %q: want 0, 1 or 2", f[2])
		}
		r.QoS = byte(q)
	}
	if len(f) == 5 {
		r.LocalPrefix, r.RemotePrefix = f[3], f[4]
	}
	return r, nil
}
