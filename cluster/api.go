package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// The admin API of one node answers for the others: it forwards a lookup
// to the node that holds the client (the registry says which), or to
// every node, as a NATS request to $XMQ.NAME.node.NODE.api. The cluster
// only carries the bytes; package web decides what a request may ask
// (read-only lookups, checked by the asking node's API auth first) and
// answers it (cmd/xmq wires ServeAPI to it).

// apiSubject is where node of cluster name answers the admin API
// requests other nodes forward.
func apiSubject(name, node string) string { return "$XMQ." + name + ".node." + node + ".api" }

// ErrNoAPI is AskNode's error when the node serves no admin API (its web
// server is off) or is not connected.
var ErrNoAPI = errors.New("cluster: the node serves no admin API")

// ServeAPI answers the API requests other nodes forward here with h, one
// at a time, on the NATS connection's goroutine for it; call it once.
// Without it, those requests fail at once with ErrNoAPI.
func (c *Cluster) ServeAPI(h func(req []byte) []byte) error {
	_, err := c.nc.Subscribe(apiSubject(c.opts.Name, c.opts.Node), func(m *nats.Msg) {
		if err := m.Respond(h(m.Data)); err != nil {
			c.warn("cannot answer an API request of another node", zap.Error(err))
		}
	})
	if err != nil {
		return fmt.Errorf("cluster: serving the API to other nodes: %w", err)
	}
	return nil
}

// AskNode sends req to node's API and returns its answer, waiting at
// most timeout.
func (c *Cluster) AskNode(node string, req []byte, timeout time.Duration) ([]byte, error) {
	if !token(node) {
		return nil, fmt.Errorf("cluster: %q is not a node name", node)
	}
	m, err := c.nc.Request(apiSubject(c.opts.Name, node), req, timeout)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, ErrNoAPI
	}
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// Holder returns the node that the client id registry names for
// clientID: the one its connection is on, or with offline the one
// keeping its persistent session; "" when the registry has no entry.
// It costs one JetStream read (at most stateTimeout).
func (c *Cluster) Holder(clientID string) (node string, offline bool, err error) {
	return c.reg.holder(clientID)
}
