package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
)

// In a cluster the API of any node answers for all of them: the nodes
// and their health (GET /api/v1/nodes, from the heartbeats), a client or
// session held on another node (GET /api/v1/clients/{id}: the client id
// registry names the node, which is asked), and the subscriptions of
// every node (GET /api/v1/subscriptions, gathered). A request goes to
// another node only once this node's API has authenticated it and
// checked its role; the other node answers only the read-only lookups
// listed in ServeForwarded, as a viewer, and never forwards further.

// forwardTimeout bounds the wait for another node's answer.
const forwardTimeout = 2 * time.Second

// Node is one node of the cluster for the nodes API and the dashboard
// (package cluster's heartbeat, adapted by the composition root, whose
// TestViewsMirrorSources fails when cluster.NodeStatus gains a field).
type Node struct {
	Node             string    `json:"node"`
	Version          string    `json:"version"`
	Started          time.Time `json:"started_at"`
	Listeners        []string  `json:"listeners,omitempty"`
	Clients          int64     `json:"clients_connected"`
	OfflineSessions  int64     `json:"sessions_offline"`
	Subscriptions    int64     `json:"subscriptions"`
	MessagesIn       int64     `json:"messages_in"`
	MessagesOut      int64     `json:"messages_out"`
	RateIn           float64   `json:"messages_in_rate"`  // per second, averaged over about a minute
	RateOut          float64   `json:"messages_out_rate"` // per second, averaged over about a minute
	Routes           int       `json:"routes"`            // NATS servers its embedded server is routed to; -1 external NATS
	Ready            bool      `json:"ready"`
	LastSeen         time.Time `json:"last_seen"`
	Reachable        bool      `json:"reachable"`
	UnreachableSince time.Time `json:"unreachable_since,omitzero"`
	Local            bool      `json:"local,omitempty"` // the node that answers
}

// Peers are the other nodes of the cluster as the API reaches them.
type Peers interface {
	// Nodes returns every node known, this one first.
	Nodes() []Node
	// Holder returns the node the client id registry names for
	// clientID (its connection's, or with offline its offline
	// session's); "" when it has no entry.
	Holder(clientID string) (node string, offline bool, err error)
	// Ask sends a request (ServeForwarded's format) to node's API and
	// returns the answer.
	Ask(node string, req []byte, timeout time.Duration) ([]byte, error)
}

// forwardedRequest is an API lookup one node asks another.
type forwardedRequest struct {
	Op    string `json:"op"`              // "client" or "subscriptions"
	ID    string `json:"id,omitempty"`    // client: the client id
	Query string `json:"query,omitempty"` // subscriptions: the URL query
	User  string `json:"user"`            // who asked, on From (for the logs)
	From  string `json:"from"`
}

// forwardedAnswer is the HTTP answer it got there.
type forwardedAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

type forwardedKey struct{}

// forwarded reports a request that another node forwarded here: it is
// answered from this node only.
func forwarded(r *http.Request) bool { return r.Context().Value(forwardedKey{}) != nil }

// ServeForwarded answers a lookup another node's API forwarded here
// (Peers.Ask's request). Only the read-only lookups of clients and
// subscriptions are served, as a viewer, from this node only; anything
// else is refused with 403. The asking node has authenticated the user
// and checked the role: the trust is the cluster's NATS, which carries
// the MQTT traffic too (docs/cluster.md).
func (s *Server) ServeForwarded(req []byte) []byte {
	var fr forwardedRequest
	rec := &recorder{header: http.Header{}}
	err := json.Unmarshal(req, &fr)
	if err == nil {
		p := principal{User: fr.From + "/" + fr.User, Role: RoleViewer, Method: "node"}
		ctx := context.WithValue(context.Background(), forwardedKey{}, fr.From)
		hr, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiPrefix+"/", nil)
		switch fr.Op {
		case "client":
			err = s.getClient(rec, hr, p, fr.ID)
		case "subscriptions":
			hr.URL.RawQuery = fr.Query
			err = s.listSubscriptions(rec, hr, p, "")
		default:
			err = errorf(http.StatusForbidden, "forbidden", fmt.Sprintf("%q is not a lookup nodes forward", fr.Op))
		}
	} else {
		err = badRequest("forwarded request: " + err.Error())
	}
	if err != nil {
		rec.buf.Reset()
		writeError(rec, err)
	}
	b, _ := json.Marshal(forwardedAnswer{Status: rec.status, Body: bytes.TrimSpace(rec.buf.Bytes())})
	return b
}

// recorder is the http.ResponseWriter of a forwarded request.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.buf.Write(b)
}
func (r *recorder) WriteHeader(code int) { r.status = code }

// ask forwards fr to node and decodes its answer.
func (s *Server) ask(node string, fr forwardedRequest) (forwardedAnswer, error) {
	fr.From = s.opts.Node
	req, _ := json.Marshal(fr) // cannot fail: strings
	b, err := s.opts.Peers.Ask(node, req, forwardTimeout)
	var a forwardedAnswer
	if err == nil {
		err = json.Unmarshal(b, &a)
	}
	if err == nil && (a.Status == 0 || len(a.Body) == 0) {
		err = errors.New("empty answer")
	}
	return a, err
}

// unavailable is the error of a node that did not answer.
func unavailable(node string, err error) *apiError {
	return errorf(http.StatusGatewayTimeout, "node_unavailable", fmt.Sprintf("node %s did not answer: %v", node, err))
}

// ---- nodes ----

type nodesJSON struct {
	Node        string `json:"node"` // the node that answers
	Reachable   int    `json:"reachable"`
	Unreachable int    `json:"unreachable"`
	Items       []Node `json:"items"`
}

// listNodes serves GET /api/v1/nodes: every node this one knows, itself
// first, with its health and load; 404 on a broker that is not in a
// cluster.
func (s *Server) listNodes(w http.ResponseWriter, _ *http.Request, _ principal, _ string) error {
	if s.opts.Peers == nil {
		return errorf(http.StatusNotFound, "not_clustered", "this broker is not a node of a cluster (cluster.enabled is off)")
	}
	out := nodesJSON{Node: s.opts.Node, Items: s.opts.Peers.Nodes()}
	if out.Items == nil {
		out.Items = []Node{}
	}
	for _, n := range out.Items {
		if n.Reachable {
			out.Reachable++
		} else {
			out.Unreachable++
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// ---- a client on another node ----

// remoteClient answers GET /clients/{id} for a client this node does not
// have: from the node the registry names, if another.
func (s *Server) remoteClient(w http.ResponseWriter, r *http.Request, p principal, id string) error {
	missing := notFound(fmt.Sprintf("client %q not found", id))
	if s.opts.Peers == nil || forwarded(r) {
		return missing
	}
	node, _, err := s.opts.Peers.Holder(id)
	switch {
	case err != nil:
		return errorf(http.StatusServiceUnavailable, "registry_unavailable",
			fmt.Sprintf("client %q is not on node %s, and the cluster's client id registry cannot say where it is: %v", id, s.opts.Node, err))
	case node == "" || node == s.opts.Node:
		return missing
	}
	a, err := s.ask(node, forwardedRequest{Op: "client", ID: id, User: p.User})
	if err != nil {
		return unavailable(node, err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(a.Status)
	_, _ = w.Write(append(a.Body, '\n'))
	return nil
}

// ---- subscriptions of every node ----

// subscriptionJSON is a subscription and, in a cluster, its node.
type subscriptionJSON struct {
	core.SubscriptionInfo
	Node string `json:"node,omitempty"`
}

// subscriptionsJSON is a page of subscriptions; in a cluster,
// NodesMissing names the nodes that did not answer (their subscriptions
// are not in it, and Total is absent).
type subscriptionsJSON struct {
	cursorPage[subscriptionJSON]
	NodesMissing []string `json:"nodes_missing,omitempty"`
}

// nodePage is one node's page of subscriptions: next is the key after
// which its next page starts, nil on its last.
type nodePage struct {
	items []subscriptionJSON
	total *int
	next  []string
}

// gatherSubscriptions asks every other reachable node for the page of
// subscriptions the request asks for and merges their pages with this
// node's (local). Nodes not reachable, or that do not answer within
// forwardTimeout, are named in NodesMissing.
func (s *Server) gatherSubscriptions(r *http.Request, p principal, local nodePage, limit int) subscriptionsJSON {
	pages := []nodePage{local}
	var missing []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.opts.Peers.Nodes() {
		switch {
		case n.Local || n.Node == s.opts.Node:
			continue
		case !n.Reachable:
			missing = append(missing, n.Node)
			continue
		}
		q := r.URL.Query()
		q.Set("node", n.Node)
		wg.Go(func() {
			np, err := s.askSubscriptions(n.Node, forwardedRequest{Op: "subscriptions", Query: q.Encode(), User: p.User})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.log.Info("subscriptions of another node not gathered", zap.String("node", n.Node), zap.Error(err))
				missing = append(missing, n.Node)
				return
			}
			pages = append(pages, np)
		})
	}
	wg.Wait()
	out := mergePages(pages, limit)
	if len(missing) > 0 {
		slices.Sort(missing)
		out.NodesMissing, out.Total = missing, nil
	}
	return out
}

// askSubscriptions asks node for its page.
func (s *Server) askSubscriptions(node string, fr forwardedRequest) (nodePage, error) {
	a, err := s.ask(node, fr)
	if err != nil {
		return nodePage{}, err
	}
	if a.Status != http.StatusOK {
		return nodePage{}, fmt.Errorf("status %d: %s", a.Status, a.Body)
	}
	var pg subscriptionsJSON
	if err := json.Unmarshal(a.Body, &pg); err != nil {
		return nodePage{}, err
	}
	np := nodePage{items: pg.Items, total: pg.Total}
	for i := range np.items {
		if np.items[i].Node == "" {
			np.items[i].Node = node
		}
	}
	if pg.Next != "" {
		if np.next = decodeCursorKey(pg.Next, 's', 2); np.next == nil {
			return nodePage{}, fmt.Errorf("cursor %q does not decode", pg.Next)
		}
	}
	return np, nil
}

// decodeCursorKey reads the key of a cursor encodeCursor made; nil when
// it is not one of list with n parts.
func decodeCursorKey(c string, list byte, n int) []string {
	r := &http.Request{URL: &url.URL{RawQuery: url.Values{"after": {c}}.Encode()}}
	_, key, err := parseCursor(r, list, n)
	if err != nil {
		return nil
	}
	return key
}

func subKey(s *subscriptionJSON) []string { return []string{s.ClientID, s.Filter} }

func compareKeys(a, b []string) int { return slices.Compare(a, b) }

// mergePages merges the nodes' pages, each in (client id, filter) order
// after the same cursor, into the page of the whole cluster: the first
// limit items, and none past the end of what a node with more to come
// has looked at (its next), since its items beyond are not known yet.
func mergePages(pages []nodePage, limit int) subscriptionsJSON {
	var all []subscriptionJSON
	var bound []string
	total, counted := 0, true
	for _, pg := range pages {
		all = append(all, pg.items...)
		if pg.next != nil && (bound == nil || compareKeys(pg.next, bound) < 0) {
			bound = pg.next
		}
		if pg.total == nil {
			counted = false
		} else {
			total += *pg.total
		}
	}
	slices.SortFunc(all, func(a, b subscriptionJSON) int {
		if c := compareKeys(subKey(&a), subKey(&b)); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	taken := all[:0:0]
	for i := range all {
		if len(taken) == limit || bound != nil && compareKeys(subKey(&all[i]), bound) > 0 {
			break
		}
		taken = append(taken, all[i])
	}
	if !counted {
		total = -1
	}
	out := subscriptionsJSON{cursorPage: newCursorPage(total, limit, taken)}
	switch {
	case len(taken) == limit && (len(all) > limit || bound != nil):
		last := taken[len(taken)-1]
		out.Next = encodeCursor('s', last.ClientID, last.Filter)
	case bound != nil:
		out.Next = encodeCursor('s', bound...)
	}
	return out
}
