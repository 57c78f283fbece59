// Package cluster makes several xmq nodes act as one broker over NATS: an
// embedded nats-server per node (routes to the other nodes, JetStream's
// files in the data directory) or an existing NATS cluster reached with
// nats.go. It satisfies core.Cluster without importing core; cmd/xmq
// wires it, handing it the broker as Local. A message crosses the seam
// as a codec.Message, both ways.
//
// A node is made of parts, each a type with its own state and the few
// things it needs: every part holds a *link (link.go: the options, the
// NATS connection, the broker, the replicated state once it exists, the
// logger, and the lifecycle Close ends) and pointers to the parts it asks;
// what a part needs of a part that holds it, or of the routing, is a
// function New sets (no two parts hold each other). *Cluster keeps the
// routing and the public API, and wires the parts:
//
//   - Cluster (cluster.go): routing. Forward publishes each local message
//     once, numbered; routeLoop hands the inbox (link.go: the node's NATS
//     subscriptions, the other nodes' session and shared group requests,
//     and functions run in order with them) to the broker in arrival
//     order; a message from another node goes to the broker once for the
//     plain subscribers, however many filters bring NATS copies of it
//     (firstCopy), and once per shared group. message.go: the NATS
//     headers that carry a codec.Message beside its topic and payload;
//     subject.go: the MQTT topic ↔ NATS subject mapping (Subject,
//     FilterSubjects, Topic), which NATS applications may use too;
//     state.go: the two JetStream key-value buckets (the client id
//     registry, retained messages), watched by one ordered consumer each,
//     never one JetStream object per MQTT subscription or client; api.go:
//     the admin API's lookups forwarded to another node.
//   - interests (interest.go, barrier.go): a NATS subscription per
//     distinct filter this node's subscribers use (a queue subscription
//     per shared group), all into the inbox, applied in order by
//     interestLoop; AwaitInterest's rounds confirm them with every node.
//   - membership (liveness.go, nodes.go): who is alive and how each node
//     is. Pings every 500 ms decide death (no answer for 3 s) and order a
//     session's move and an AwaitInterest with the other nodes' NATS
//     servers; heartbeats every Options.HeartbeatInterval carry each
//     node's figures (the node table, its sums the cluster totals) and
//     mark a node unreachable after three intervals. One part, two
//     signals: deciding death from heartbeats would change when a dead
//     node's sessions are adopted.
//   - registry (registry.go, order.go): this node's side of the client id
//     registry. An entry names the node, the session's owner and when the
//     claim began, so that identity and takeover order hold cluster-wide
//     (Claim, mayTake; a claim read late on a frozen node loses).
//   - retainedSync (retained.go): retained messages through their bucket:
//     this node's changes queued and written by retainLoop, every node's
//     kept from the bucket's watch.
//   - sessions (session.go): persistent sessions moving to the node their
//     client reconnects to, in two requests to the node that held the id
//     (subscriptions, then the session core exported there) with pings
//     that order the hand-off with the messages in flight
//     (docs/cluster.md); the check of a node's sessions against the
//     registry when it comes back (reconcile).
//   - replica (replica.go, replay.go): with Options.SessionReplicas above
//     1, the store wrapper that writes persistent sessions' store records
//     to one JetStream stream per cluster too (Sync waits for them), the
//     reading of a dead node's records, and the marks of what each node
//     routed.
//   - replayer (replay.go, replica.go): the ring of the QoS 1/2 messages
//     this node forwarded lately, and the replays that give a dead node's
//     sessions, rebuilt elsewhere (install) or back with their node
//     (rejoin), what was published for them while no node held them.
//   - adopter (adopt.go): the rebuilding of a dead node's sessions here,
//     those that hash to this node, with their wills.
//   - sticky (sticky.go): shared groups with a hash strategy, whose
//     messages the publisher's node sends to the node the hash picks
//     among those whose heartbeats list the group.
//   - embedded.go, options.go: the embedded server — its trust as NATS
//     recommends: route authorization with the cluster's secret, TLS
//     between nodes, the nodes' account (XMQ: $XMQ.>, JetStream) and the
//     applications' (APP: the mapped subjects only) — and the options.
//
// Goroutines: interestLoop applies interest changes in order (Interest
// only queues them, since core calls it under its router's lock);
// routeLoop (after rejoin, the replay of a node that comes back) hands
// the inbox to the broker in arrival order, which keeps each publisher's
// order, and serves the other nodes' session requests in that order too;
// freezeLoop notes when the node was frozen; stateLoop makes the buckets
// and runs their two watches, retainLoop, which writes queued retained
// changes, replicaLoop, which writes the session replicas and their
// marks, livenessLoop, which pings the other nodes and adopts a dead one's
// sessions on goroutines of its own, and reconcile, once. Release and a
// takeover of a connection not yet attached run briefly on their own;
// heartbeatLoop (from StartHeartbeats) sends the heartbeats and marks the
// silent nodes, while the other nodes' heartbeats, API requests and replay
// requests are handled on the NATS connection's goroutines for their
// subscriptions; marksLoop (Options.MarksFile) saves the marks to a file.
// Close stops them all and waits for them. Forward, Retain, Claim and
// Release run on the broker's goroutines and never block on the network,
// except Claim, which waits for one JetStream round trip (at most 2 s per
// attempt, 10 s in all while the registry elects a leader) and, when a
// session moves here, for the other node's two answers (at most 2 s each)
// or the dead node's replicated records (at most 30 s), this node's NATS
// subscriptions and pings (at most 1 s each); claims of one client id on
// one node run one at a time. A session request is served on routeLoop (a
// "take" after a ping, on its own goroutine), and the session that arrives
// is installed there, so both are ordered with the messages.
package cluster
