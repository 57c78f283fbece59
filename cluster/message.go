package cluster

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/xmq-io/xmq/codec"
)

// The NATS headers that carry what MQTT keeps beside a message's topic
// and payload (docs/cluster.md). The payload is the MQTT payload as is, so
// a NATS application reads it directly; a message without headers is a
// QoS 0 message without properties. Text values that may hold anything
// (client ids, content types, user properties) are URL query-escaped
// (url.QueryEscape), binary ones base64 (standard, padded).
const (
	hdrQoS           = "Mqtt-Qos"              // "0", "1" or "2"; absent: 0
	hdrRetain        = "Mqtt-Retain"           // "1" when the PUBLISH had the retain flag
	hdrExpires       = "Mqtt-Expires"          // Unix milliseconds when it expires; absent: never
	hdrFrom          = "Mqtt-From"             // the publishing client's id, escaped
	hdrPayloadFormat = "Mqtt-Payload-Format"   // "0" or "1"
	hdrContentType   = "Mqtt-Content-Type"     // escaped
	hdrResponseTopic = "Mqtt-Response-Topic"   // escaped MQTT topic
	hdrCorrelation   = "Mqtt-Correlation-Data" // base64
	hdrUser          = "Mqtt-User"             // repeated in order: escaped key "=" escaped value
	hdrNode          = "Xmq-Node"              // the node it was published on
	hdrServed        = "Xmq-Served"            // repeated: the NATS queue of each shared group served on that node
	hdrGroup         = "Xmq-Group"             // handed over: for this NATS queue's shared group only (Cluster.HandOver)
	// hdrID numbers a forwarded QoS 0 message on its node (base 36), as
	// hdrSeq numbers QoS 1/2 ones: the node receiving it tells NATS's
	// copies of one message from the next (Cluster.firstCopy).
	hdrID = "Xmq-Id"
)

// encodeHeader returns the headers of m forwarded by node: what MQTT keeps
// beside its topic (the subject) and payload (the data).
func encodeHeader(node string, m *codec.Message) nats.Header {
	h := make(nats.Header, 4)
	h[hdrNode] = []string{node}
	if m.QoS > 0 {
		h[hdrQoS] = []string{qosText[m.QoS&3]}
	}
	if m.Retain {
		h[hdrRetain] = []string{"1"}
	}
	if !m.Expires.IsZero() {
		h[hdrExpires] = []string{strconv.FormatInt(m.Expires.UnixMilli(), 10)}
	}
	if m.From != "" {
		h[hdrFrom] = []string{url.QueryEscape(m.From)}
	}
	setProps(h, m.Props)
	return h
}

// setProps adds the headers of props (nil: none) to h.
func setProps(h nats.Header, props *codec.Properties) {
	if props == nil {
		return
	}
	if props.Has(codec.PropPayloadFormat) {
		h[hdrPayloadFormat] = []string{strconv.Itoa(int(props.PayloadFormat))}
	}
	if len(props.ContentType) > 0 {
		h[hdrContentType] = []string{url.QueryEscape(string(props.ContentType))}
	}
	if len(props.ResponseTopic) > 0 {
		h[hdrResponseTopic] = []string{url.QueryEscape(string(props.ResponseTopic))}
	}
	if len(props.CorrelationData) > 0 {
		h[hdrCorrelation] = []string{base64.StdEncoding.EncodeToString(props.CorrelationData)}
	}
	if len(props.User) > 0 {
		us := make([]string, len(props.User))
		for i, u := range props.User {
			us[i] = url.QueryEscape(string(u.Key)) + "=" + url.QueryEscape(string(u.Value))
		}
		h[hdrUser] = us
	}
}

var qosText = [4]string{"0", "1", "2", "2"}

// incoming is a message from NATS: the message as DeliverRemote takes it,
// with where it comes from.
type incoming struct {
	msg codec.Message
	// node is the node it was published on, seq its number there (0:
	// none; replay.go).
	node string
	seq  uint64
}

// decodeMsg sets in to the message on topic with payload (empty: nil)
// and the headers h (decodeHeader), in place: a message from another
// node is copied once on its way to the broker.
func decodeMsg(in *incoming, topic string, payload []byte, h nats.Header) {
	decodeHeader(in, h)
	in.msg.Topic = topic
	if len(payload) > 0 {
		in.msg.Payload = payload
	}
}

// decodeHeader reads the headers encodeHeader writes; a value that does
// not parse is ignored (a NATS application's mistake must not drop the
// message), except a QoS out of range, which is taken as 0.
func decodeHeader(in *incoming, h nats.Header) {
	if len(h) == 0 {
		return
	}
	if v := h.Get(hdrQoS); v == "1" || v == "2" {
		in.msg.QoS = v[0] - '0'
	}
	in.msg.Retain = h.Get(hdrRetain) == "1"
	if v := h.Get(hdrSeq); v != "" {
		if n, err := strconv.ParseUint(v, 36, 64); err == nil && token(h.Get(hdrNode)) {
			in.node, in.seq = h.Get(hdrNode), n
		}
	}
	if v := h.Get(hdrExpires); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			in.msg.Expires = time.UnixMilli(ms)
		}
	}
	if v := h.Get(hdrFrom); v != "" {
		in.msg.From, _ = url.QueryUnescape(v)
	}
	in.msg.Props = decodeProps(h)
}

// decodeProps reads the headers setProps writes; nil when there are none.
func decodeProps(h nats.Header) *codec.Properties {
	var p codec.Properties
	any := false
	if v := h.Get(hdrPayloadFormat); v == "0" || v == "1" {
		p.SetNum(codec.PropPayloadFormat, uint32(v[0]-'0'))
		any = true
	}
	if v := h.Get(hdrContentType); v != "" {
		if s, err := url.QueryUnescape(v); err == nil && s != "" && codec.ValidUTF8([]byte(s)) {
			p.ContentType, any = []byte(s), true
		}
	}
	if v := h.Get(hdrResponseTopic); v != "" {
		if s, err := url.QueryUnescape(v); err == nil && codec.ValidTopicName([]byte(s)) == nil && codec.ValidUTF8([]byte(s)) {
			p.ResponseTopic, any = []byte(s), true
		}
	}
	if v := h.Get(hdrCorrelation); v != "" {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) > 0 {
			p.CorrelationData, any = b, true
		}
	}
	for _, kv := range h[hdrUser] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		ks, err1 := url.QueryUnescape(k)
		vs, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || !codec.ValidUTF8([]byte(ks)) || !codec.ValidUTF8([]byte(vs)) {
			continue
		}
		p.User = append(p.User, codec.UserProperty{Key: []byte(ks), Value: []byte(vs)})
		any = true
	}
	if !any {
		return nil
	}
	return &p
}
