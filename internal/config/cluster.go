package config

import (
	"os"
	"strings"
	"time"
)

// Cluster is the cluster section (cluster.Options with YAML names).
// Empty values mean the cluster package's defaults.
type Cluster struct {
	// Enabled makes this xmq a node of a cluster; off, no NATS runs.
	Enabled bool `yaml:"enabled"`
	// Name is the cluster's name (default "xmq").
	Name string `yaml:"name"`
	// Node is this node's name (default: the host name).
	Node string `yaml:"node"`
	// Secret (or the first line of SecretFile) is the cluster's shared
	// secret, which routes must present; required when a route or listen
	// address is not on loopback (xmq cluster secret makes one).
	Secret     string `yaml:"secret" secret:"true"`
	SecretFile string `yaml:"secret_file"`
	// MaxNodes bounds the node table (default 64); ForgetAfter drops a
	// node silent that long (default 1h).
	MaxNodes    int           `yaml:"max_nodes"`
	ForgetAfter time.Duration `yaml:"forget_after"`
	// SubjectPrefix is the root of the topic ↔ subject mapping (default "mqtt").
	SubjectPrefix string `yaml:"subject_prefix"`
	// Replicas of the replicated state; 0 = min(3, nodes).
	Replicas int `yaml:"replicas"`
	// SessionReplicas is the number of copies of each persistent
	// session (1: the node's store only; up to 3).
	SessionReplicas int `yaml:"session_replicas"`
	// HeartbeatInterval is how often the node tells the others how it is;
	// one silent for three intervals is unreachable (default 2s).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// ReplayWindow and ReplayMaxBytes bound how long, and in how many
	// bytes, a node with session replicas keeps the QoS 1/2 messages it
	// forwarded, for the sessions of a dead node rebuilt elsewhere
	// (default 30s, 64 MiB).
	ReplayWindow   time.Duration `yaml:"replay_window"`
	ReplayMaxBytes int64         `yaml:"replay_max_bytes"`
	NATS           ClusterNATS   `yaml:"nats"`
}

// ClusterNATS is where the NATS the nodes share runs.
type ClusterNATS struct {
	// URL joins an existing NATS cluster; "" runs NATS embedded.
	URL             string          `yaml:"url"`
	CredentialsFile string          `yaml:"credentials_file"`
	User            string          `yaml:"user"`
	Password        string          `yaml:"password" secret:"true"`
	Token           string          `yaml:"token" secret:"true"`
	TLS             ClusterTLS      `yaml:"tls"`
	Embedded        ClusterEmbedded `yaml:"embedded"`
}

// ClusterTLS secures the connection to an external NATS, or the
// embedded server's routes and client port.
type ClusterTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// ClusterEmbedded configures the embedded NATS server.
type ClusterEmbedded struct {
	// Listen is the route address the other nodes connect to.
	Listen string `yaml:"listen"`
	// ClientListen is the NATS client address, for NATS applications.
	ClientListen string `yaml:"client_listen"`
	// Routes are the other nodes' listen addresses.
	Routes []string `yaml:"routes"`
	// Advertise is the route address the other nodes are told to use for
	// this one, when it is not listen (NAT, containers, a proxy).
	Advertise string `yaml:"advertise"`
	// TLS is the node's certificate for routes (verified both ways
	// against ca_file) and the client port.
	TLS ClusterTLS `yaml:"tls"`
	// Users are the NATS applications' users on client_listen.
	Users []ClusterUser `yaml:"users"`
}

// ClusterUser is a NATS application's user of the embedded server.
type ClusterUser struct {
	Name     string `yaml:"name"`
	Password string `yaml:"password" secret:"true"`
	// NKey is a public user nkey (U...), instead of a password.
	NKey string `yaml:"nkey"`
	// Publish and Subscribe are subjects within subject_prefix.> (empty:
	// all of it).
	Publish   []string `yaml:"publish"`
	Subscribe []string `yaml:"subscribe"`
}

// SecretValue is the cluster secret: secret, or secret_file's first line.
func (c Cluster) SecretValue() (string, error) {
	if c.SecretFile == "" {
		return c.Secret, nil
	}
	b, err := os.ReadFile(c.SecretFile)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}
