// Package cluster makes several xmq nodes act as one broker over NATS: an
// embedded nats-server per node (routes to the other nodes, JetStream's
// files in the data directory) or an existing NATS cluster reached with
// nats.go. It satisfies core.Cluster without importing core; cmd/xmq
// wires it, handing it the broker as Local.
//
// What it owns:
//
//   - subject.go: the MQTT topic ↔ NATS subject mapping (Subject,
//     FilterSubjects, Topic), which NATS applications may use too.
//   - message.go: the NATS headers that carry QoS, the retain flag, the
//     expiry deadline, the publisher and the MQTT 5 properties.
//   - cluster.go: routing. A NATS subscription per distinct filter this
//     node's subscribers use (a queue subscription per shared group), all
//     into one inbox; Forward publishes each local message once, numbered;
//     a message from another node goes to the broker once for the plain
//     subscribers, however many filters bring NATS copies of it
//     (firstCopy), and once per shared group.
//   - state.go: the replicated state in two JetStream key-value buckets
//     per cluster (the client id registry, retained messages), watched by
//     one ordered consumer each; never one JetStream object per MQTT
//     subscription or client. A registry entry names the node, the
//     session's owner and when the claim began, so that identity and
//     takeover order hold cluster-wide (Claim, mayTake).
//   - session.go: persistent sessions moving to the node their client
//     reconnects to, in two requests to the node that held the id
//     (subscriptions, then the session core exported there) with pings
//     that order the hand-off with the messages in flight
//     (docs/cluster.md).
//   - replica.go: with Options.SessionReplicas above 1, the store
//     wrapper that writes persistent sessions' store records to one
//     JetStream stream per cluster too (Sync waits for them), and the
//     rebuilding of a session from a dead node's records.
//   - sticky.go: shared groups with a hash strategy, whose messages the
//     publisher's node sends to the node the hash picks among those
//     whose heartbeats list the group.
//   - replay.go: the ring of the QoS 1/2 messages a node forwarded
//     lately, the marks of what each node routed, and the replay that
//     gives a dead node's sessions, rebuilt elsewhere or back with their
//     node, what was published for them while no node held them.
//   - liveness.go: node death (pings), the adoption of a dead node's
//     sessions and wills, and the check of a node's sessions against
//     the registry when it comes back.
//   - nodes.go: the heartbeats every node sends on NATS core and the
//     table of the other nodes built from them (reachable or not, their
//     load), whose sums are the cluster totals.
//   - api.go: the admin API's lookups forwarded to another node, and
//     the registry read that says which node holds a client id.
//   - order.go: the order of takeovers (a claim that began while this
//     node was frozen loses to a connection made elsewhere meanwhile) and
//     the question to the node holding a client id whose session it is.
//   - embedded.go, options.go: the embedded server — its trust as NATS
//     recommends: route authorization with the cluster's secret, TLS
//     between nodes, the nodes' account (XMQ: $XMQ.>, JetStream) and the
//     applications' (APP: the mapped subjects only) — and the options.
//
// Goroutines: interestLoop applies interest changes in order (Interest
// only queues them, since core calls it under its router's lock);
// routeLoop (after rejoin, the replay of a node that comes back) hands
// the inbox to the broker in arrival order, which keeps
// each publisher's order, and serves the other nodes' session requests in
// that order too; stateLoop makes the buckets and runs their two
// watches and retainLoop, which writes queued retained changes; Release
// and a takeover of a connection not yet attached run briefly on their
// own; heartbeatLoop (from StartHeartbeats) sends the heartbeats and marks
// the silent nodes, while the other nodes' heartbeats and API requests
// are handled on the NATS connection's goroutines for their
// subscriptions, as are replay requests. replicaLoop writes the session
// replicas and their marks, marksLoop (session replicas 1) saves the
// marks to a file; livenessLoop
// pings the other nodes and adopts a dead one's sessions on goroutines
// of its own; reconcile runs once the state is ready. Close stops them
// all and waits for them. Forward, Retain, Claim and Release run on the
// broker's goroutines and never block on the network, except Claim,
// which waits for one JetStream round trip (at most 2 s per attempt, 10
// s in all while the registry elects a leader) and, when a session moves
// here, for the other node's two answers (at most 2 s each) or the dead
// node's replicated records (at most 30 s), this node's NATS
// subscriptions and pings (at most 1 s each); claims of one client id on
// one node run one at a time. A session request is served on routeLoop
// (a "take" after a ping, on its own goroutine), and the session that
// arrives is installed there, so both are ordered with the messages.
package cluster
