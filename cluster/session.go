package cluster

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Sessions move: a connection that does not start clean, on a node other
// than the one that held its client id (the registry's entry, connected
// or with its session left offline there), asks that node for the
// session over NATS before the session is attached. That node closes the
// connection if it is still there (a takeover), takes the session out of
// its broker (core encodes it with its store's records) and answers with
// it; this node installs it, so CONNACK says Session Present and the
// queued messages flow from here.

// sessionTimeout bounds the wait for another node's session: past it
// (the node is dead or cut off) the connection starts a new session here.
const sessionTimeout = 2 * time.Second

// hdrClaim is the header of a session request holding the requester's
// claim (registry revision); hdrError is the answer's refusal.
const (
	hdrClaim = "Xmq-Claim"
	hdrError = "Xmq-Error"
)

// sessionSubject is where node of cluster name answers session requests:
// outside the subject prefix (which may not hold '$'), so that no MQTT
// subscription, nor a NATS application reading MQTT traffic, sees it.
func sessionSubject(name, node string) string {
	return "$XMQ." + name + ".node." + node + ".session"
}

// moveSession brings clientID's session from node, which held the id
// before this node's claim rev.
func (c *Cluster) moveSession(clientID, node string, rev uint64) {
	req := nats.NewMsg(sessionSubject(c.opts.Name, node))
	req.Data = []byte(clientID)
	req.Header.Set(hdrClaim, strconv.FormatUint(rev, 10))
	start := time.Now()
	resp, err := c.nc.RequestMsg(req, sessionTimeout)
	if err == nil && resp.Header.Get(hdrError) != "" {
		err = errorString(resp.Header.Get(hdrError))
	}
	if err != nil {
		c.sessionsLost.Add(1)
		c.log.Warn("session not moved from another node: the connection starts a new session here",
			zap.String("client_id", clientID), zap.String("from", node), zap.Error(err))
		return
	}
	if len(resp.Data) == 0 {
		return // no persistent session there (ended, expired, or Clean Start 0 with no expiry)
	}
	if err := c.local.ImportSession(clientID, resp.Data); err != nil {
		c.sessionsLost.Add(1)
		c.log.Warn("session moved from another node could not be installed: the connection starts a new session here",
			zap.String("client_id", clientID), zap.String("from", node), zap.Error(err))
		return
	}
	// Its subscriptions are this node's before the client is told the
	// session is here.
	if err := c.syncInterest(sessionTimeout); err != nil {
		c.warn("a moved session's subscriptions are not on NATS yet", zap.String("client_id", clientID), zap.Error(err))
	}
	c.sessionsIn.Add(1)
	c.log.Info("session moved here", zap.String("client_id", clientID), zap.String("from", node),
		zap.Int("bytes", len(resp.Data)), zap.Duration("took", time.Since(start)))
}

type errorString string

func (e errorString) Error() string { return string(e) }

// serveSession answers another node's request for a session of this
// node: unless a claim of this node newer than the requester's holds the
// id (the client came back here meanwhile), the session leaves the
// broker and goes in the answer (empty when there is none).
func (c *Cluster) serveSession(m *nats.Msg) {
	id := string(m.Data)
	rev, _ := strconv.ParseUint(m.Header.Get(hdrClaim), 10, 64)
	resp := nats.NewMsg(m.Reply)
	c.claims.mu.Lock()
	ours := c.claims.m[id]
	c.claims.mu.Unlock()
	if ours > rev {
		resp.Header.Set(hdrError, "the client connected again on node "+c.opts.Node)
	} else {
		max := int(c.nc.MaxPayload()) - 1024 // room for the headers
		if resp.Data = c.local.ExportSession(id, max); resp.Data != nil {
			c.sessionsOut.Add(1)
		}
	}
	if err := c.nc.PublishMsg(resp); err != nil {
		c.warn("cannot answer a session request", zap.String("client_id", id), zap.Error(err))
	}
}
