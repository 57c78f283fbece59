// Package bridgelocal adapts *core.Server to bridge.Local: the bridges'
// view of the local broker. It is the one place that knows both packages,
// so that bridge never imports core; cmd/xmq and the bridge tests use it.
package bridgelocal

import (
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/core"
)

// Local is a *core.Server as bridge.Local.
type Local struct{ *core.Server }

var _ bridge.Local = Local{}

// Session implements bridge.Local.
func (l Local) Session(clientID string) (bridge.SessionInfo, bool) {
	ci, ok := l.Client(clientID)
	if !ok {
		return bridge.SessionInfo{}, false
	}
	s := bridge.SessionInfo{Queued: ci.Queued, Inflight: ci.Inflight, Dropped: ci.Dropped, AwaitingRelease: ci.AwaitingRelease}
	for _, sub := range ci.Subscriptions {
		s.Filters = append(s.Filters, sub.Filter)
	}
	return s, true
}

// SessionIDs implements bridge.Local.
func (l Local) SessionIDs(prefix string) []string {
	var ids []string
	q := core.ClientQuery{IDPrefix: prefix, Limit: 1000}
	for {
		p := l.ClientsPage(q)
		for _, c := range p.Clients {
			ids = append(ids, c.ClientID)
		}
		if !p.More {
			return ids
		}
		q.After = p.Next
	}
}
