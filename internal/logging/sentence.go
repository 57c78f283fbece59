package logging

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// sentenceEncoder is zap's console encoder that writes the broker's
// connection events as one sentence each, the way Mosquitto users read
// them:
//
//	client sensor-7 connected from 10.0.0.5:51234 over tls as alice (MQTT 5, keepalive 60, clean start)
//	client sensor-7 disconnected: keepalive timeout (connected for 2h3m4s)
//
// The sentence is made from the entry's fields (client_id, remote,
// transport or listener, username, protocol, keepalive, clean_start,
// reason …), which it then leaves out; every other entry, and every field
// the sentence does not use, is written as the console encoder writes it.
// JSON output has no sentences: machines read the fields.
type sentenceEncoder struct{ zapcore.Encoder }

func newSentenceEncoder(ec zapcore.EncoderConfig) zapcore.Encoder {
	return sentenceEncoder{zapcore.NewConsoleEncoder(ec)}
}

func (e sentenceEncoder) Clone() zapcore.Encoder { return sentenceEncoder{e.Encoder.Clone()} }

func (e sentenceEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	if s, rest, ok := sentence(ent.Message, fields); ok {
		ent.Message = s
		fields = rest
	}
	return e.Encoder.EncodeEntry(ent, fields)
}

// eventFields are the fields of one entry, by name.
type eventFields map[string]zapcore.Field

func (f eventFields) str(k string) string {
	x, ok := f[k]
	if !ok {
		return ""
	}
	switch x.Type {
	case zapcore.StringType:
		return x.String
	case zapcore.StringerType:
		return fmt.Sprint(x.Interface)
	case zapcore.ErrorType:
		return x.Interface.(error).Error()
	case zapcore.DurationType:
		return time.Duration(x.Integer).String()
	case zapcore.BoolType:
		if x.Integer == 1 {
			return "true"
		}
		return "false"
	case zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type,
		zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type:
		return fmt.Sprint(x.Integer)
	}
	return fmt.Sprint(x.Interface)
}

func (f eventFields) flag(k string) bool {
	x, ok := f[k]
	return ok && x.Type == zapcore.BoolType && x.Integer == 1
}

// protocolNames are the MQTT versions by protocol level.
var protocolNames = map[string]string{"3": "MQTT 3.1", "4": "MQTT 3.1.1", "5": "MQTT 5"}

// closeWords say a core.CloseReason as a sentence ends.
var closeWords = map[string]string{
	"normal": "sent DISCONNECT", "disconnect_with_will": "sent DISCONNECT with its will", "peer_gone": "connection lost",
	"keepalive_timeout": "keepalive timeout", "connect_timeout": "no CONNECT in time", "malformed_packet": "malformed packet",
	"protocol_error": "protocol error", "packet_too_large": "packet too large", "taken_over": "session taken over by a new connection",
	"auth_failure": "authentication failed", "connect_refused": "connection refused", "slow_consumer": "slow consumer (write timeout)",
	"server_shutdown": "server shutting down", "admin": "disconnected by an operator", "store_error": "store error",
	"not_authorized": "not authorized", "server_busy": "server busy",
}

// sentence renders the known events; rest are the fields it did not use.
func sentence(msg string, fields []zapcore.Field) (string, []zapcore.Field, bool) {
	f := make(eventFields, len(fields))
	for _, x := range fields {
		f[x.Key] = x
	}
	var b strings.Builder
	var used []string
	use := func(keys ...string) { used = append(used, keys...) }
	id := f.str("client_id")
	client := "client " + id
	if id == "" {
		client = "a client"
	}
	from := func() {
		if r := f.str("remote"); r != "" {
			b.WriteString(" from " + r)
		}
		switch t, l := f.str("transport"), f.str("listener"); {
		case t != "" && (l == "" || l == t):
			b.WriteString(" over " + t)
		case t != "":
			b.WriteString(" over " + t + " (listener " + l + ")")
		case l != "":
			b.WriteString(" on listener " + l)
		}
		use("remote", "transport", "listener", "client_id")
	}
	switch {
	case msg == "client connected":
		b.WriteString(client + " connected")
		from()
		if u := f.str("username"); u != "" {
			b.WriteString(" as " + u)
		}
		var details []string
		if p, ok := protocolNames[f.str("protocol")]; ok {
			details = append(details, p)
		}
		if ka, ok := f["keepalive"]; ok {
			if d := time.Duration(ka.Integer); d > 0 {
				details = append(details, fmt.Sprintf("keepalive %g", d.Seconds()))
			} else {
				details = append(details, "no keepalive")
			}
		}
		switch {
		case f.flag("clean_start"):
			details = append(details, "clean start")
		case f.flag("session_present"):
			details = append(details, "session resumed")
		default:
			details = append(details, "new session")
		}
		if f.flag("bridge") {
			details = append(details, "bridge")
		}
		b.WriteString(" (" + strings.Join(details, ", ") + ")")
		use("username", "protocol", "keepalive", "clean_start", "session_present", "bridge")
	case msg == "client disconnected":
		reason := f.str("reason")
		if w, ok := closeWords[reason]; ok {
			reason = w
		}
		b.WriteString(client + " disconnected: " + reason)
		if d := f.str("connected_for"); d != "" {
			b.WriteString(" (connected for " + roundDuration(f["connected_for"]) + ")")
		}
		use("client_id", "reason", "connected_for", "remote", "listener")
	case msg == "refusing connection":
		b.WriteString(client + " refused")
		from()
		if u := f.str("username"); u != "" {
			b.WriteString(" as " + u)
		}
		b.WriteString(": " + f.str("reason_code"))
		if why := f.str("why"); why != "" {
			b.WriteString(" (" + why + ")")
		}
		use("username", "reason_code", "why")
	case strings.HasPrefix(msg, "closing connection: "), strings.HasPrefix(msg, "refusing connection: "):
		what, why, _ := strings.Cut(msg, ": ")
		b.WriteString(client)
		from()
		b.WriteString(": " + strings.TrimSuffix(what, " connection") + " connection, " + why)
		if e := f.str("error"); e != "" {
			b.WriteString(": " + e)
			use("error")
		}
	case msg == "session taken over":
		b.WriteString(client + " (" + f.str("remote") + ") taken over by a new connection from " + f.str("by"))
		use("client_id", "remote", "by", "listener")
	case msg == "listening":
		fmt.Fprintf(&b, "listener %s listening on %s (%s)", f.str("listener"), f.str("address"), f.str("transport"))
		use("listener", "address", "transport")
	default:
		return "", fields, false
	}
	rest := make([]zapcore.Field, 0, len(fields))
	for _, x := range fields {
		if !containsKey(used, x.Key) {
			rest = append(rest, x)
		}
	}
	return b.String(), rest, true
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// roundDuration writes a duration field to the second (to the
// millisecond below one).
func roundDuration(f zapcore.Field) string {
	d := time.Duration(f.Integer)
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// sinkCore is a zap core that hands each entry, encoded without time and
// level, to emit with its fields: syslog and the journal, which carry
// time and priority themselves.
type sinkCore struct {
	zapcore.LevelEnabler
	enc    zapcore.Encoder
	fields []zapcore.Field
	emit   func(ent zapcore.Entry, msg []byte, fields []zapcore.Field) error
}

func (c *sinkCore) With(fs []zapcore.Field) zapcore.Core {
	d := *c
	d.fields = append(append([]zapcore.Field(nil), c.fields...), fs...)
	return &d
}

func (c *sinkCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *sinkCore) Write(ent zapcore.Entry, fs []zapcore.Field) error {
	all := append(append([]zapcore.Field(nil), c.fields...), fs...)
	buf, err := c.enc.EncodeEntry(ent, all)
	if err != nil {
		return err
	}
	defer buf.Free()
	return c.emit(ent, []byte(strings.TrimRight(buf.String(), "\n")), all)
}

func (c *sinkCore) Sync() error { return nil }
