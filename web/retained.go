package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"go.uber.org/zap"
)

// retainedAPI serves /api/v1/retained: the retained messages, read and
// deleted by an operator.
type retainedAPI struct {
	broker Broker
	log    *zap.Logger
}

type retainedJSON struct {
	Topic         string    `json:"topic"`
	QoS           byte      `json:"qos"`
	Size          int       `json:"size"`
	Payload       *string   `json:"payload,omitempty"` // the payload as text, when it is UTF-8
	PayloadBase64 string    `json:"payload_base64,omitempty"`
	ContentType   string    `json:"content_type,omitempty"`
	Expires       time.Time `json:"expires_at,omitzero"`
	Stored        time.Time `json:"stored_at,omitzero"` // absent: stored before xmq kept the time
	From          string    `json:"from,omitempty"`     // the publisher's client id; "" the broker
	// The MQTT 5 properties forwarded to subscribers (detail only).
	PayloadFormat   *byte          `json:"payload_format,omitempty"` // 1: UTF-8 text
	ResponseTopic   string         `json:"response_topic,omitempty"`
	CorrelationData string         `json:"correlation_data_base64,omitempty"`
	UserProperties  []userProperty `json:"user_properties,omitempty"`
}

type userProperty struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

const previewLen = 120

func retainedOf(m *core.Message, stored time.Time, full bool) retainedJSON {
	j := retainedJSON{Topic: m.Topic, QoS: m.QoS, Size: len(m.Payload), Expires: m.Expires, Stored: stored, From: m.From}
	if p := m.Props; p != nil {
		j.ContentType = string(p.ContentType)
		if full {
			if p.Has(codec.PropPayloadFormat) {
				f := p.PayloadFormat
				j.PayloadFormat = &f
			}
			j.ResponseTopic = string(p.ResponseTopic)
			if len(p.CorrelationData) > 0 {
				j.CorrelationData = base64.StdEncoding.EncodeToString(p.CorrelationData)
			}
			for _, u := range p.User {
				j.UserProperties = append(j.UserProperties, userProperty{string(u.Key), string(u.Value)})
			}
		}
	}
	if utf8.Valid(m.Payload) {
		text := string(m.Payload)
		if !full && len(text) > previewLen {
			cut := previewLen
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut] + "…"
		}
		j.Payload = &text
	}
	if full {
		j.PayloadBase64 = base64.StdEncoding.EncodeToString(m.Payload)
	}
	return j
}

func (a retainedAPI) listRetained(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	limit, after, err := parseCursor(r, 'r', 1)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Has("q") {
		return badRequest("q: searching text anywhere in the topics would read every one; use prefix= (topics starting with) or filter= (an MQTT filter)")
	}
	filter, prefix := q.Get("filter"), q.Get("prefix")
	if filter != "" {
		if err := codec.ValidFilter([]byte(filter)); err != nil {
			return badRequest(fmt.Sprintf("filter %q: %v", filter, err))
		}
	}
	if filter == "" && prefix == "" {
		// Clients' messages: # matches no $ topic, so the broker's $SYS
		// topics are left out unless asked for (prefix=$SYS/).
		filter = "#"
	}
	p := a.broker.RetainedPage(core.RetainedQuery{Filter: filter, Prefix: prefix, After: after[0], Limit: limit})
	items := make([]retainedJSON, len(p.Messages))
	for i, m := range p.Messages {
		var stored time.Time
		if i < len(p.Stored) {
			stored = p.Stored[i]
		}
		items[i] = retainedOf(m, stored, false)
	}
	out := newCursorPage(p.Total, limit, items)
	if p.More {
		out.Next = encodeCursor('r', p.Next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a retainedAPI) getRetained(w http.ResponseWriter, r *http.Request, _ principal, topic string) error {
	m, stored, ok := a.broker.RetainedMessage(topic)
	if !ok {
		return notFound(fmt.Sprintf("no retained message on %q", topic))
	}
	writeJSON(w, http.StatusOK, retainedOf(m, stored, true))
	return nil
}

func (a retainedAPI) deleteRetained(w http.ResponseWriter, r *http.Request, p principal, topic string) error {
	if !a.broker.DeleteRetained(topic) {
		return notFound(fmt.Sprintf("no retained message on %q", topic))
	}
	a.log.Info("retained message deleted by operator", zap.String("topic", topic), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "deleted": true})
	return nil
}
