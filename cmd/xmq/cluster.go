package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/core"
)

// cluster.Store spells out core.Store's methods (cluster does not import
// core): each must satisfy the other, so that a method added to one side
// only fails the build here, rather than leave a store write out of the
// session replicas or the replicas' wrapper out of the broker.
var (
	_ core.Store    = cluster.Store(nil)
	_ cluster.Store = core.Store(nil)
)

// clusterConfig is the cluster section (cluster.Options with YAML names).
// Empty values mean the cluster package's defaults.
type clusterConfig struct {
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
	ReplayWindow   time.Duration     `yaml:"replay_window"`
	ReplayMaxBytes int64             `yaml:"replay_max_bytes"`
	NATS           clusterNATSConfig `yaml:"nats"`
}

// clusterNATSConfig is where the NATS the nodes share runs.
type clusterNATSConfig struct {
	// URL joins an existing NATS cluster; "" runs NATS embedded.
	URL             string           `yaml:"url"`
	CredentialsFile string           `yaml:"credentials_file"`
	User            string           `yaml:"user"`
	Password        string           `yaml:"password" secret:"true"`
	Token           string           `yaml:"token" secret:"true"`
	TLS             clusterTLSConfig `yaml:"tls"`
	Embedded        clusterEmbedded  `yaml:"embedded"`
}

// clusterTLSConfig secures the connection to an external NATS, or the
// embedded server's routes and client port.
type clusterTLSConfig struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// clusterEmbedded configures the embedded NATS server.
type clusterEmbedded struct {
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
	TLS clusterTLSConfig `yaml:"tls"`
	// Users are the NATS applications' users on client_listen.
	Users []clusterUser `yaml:"users"`
}

// clusterUser is a NATS application's user of the embedded server.
type clusterUser struct {
	Name     string `yaml:"name"`
	Password string `yaml:"password" secret:"true"`
	// NKey is a public user nkey (U...), instead of a password.
	NKey string `yaml:"nkey"`
	// Publish and Subscribe are subjects within subject_prefix.> (empty:
	// all of it).
	Publish   []string `yaml:"publish"`
	Subscribe []string `yaml:"subscribe"`
}

// withDefaults spells out the defaults (for comparing configurations).
func (c clusterConfig) withDefaults() clusterConfig {
	o := c.options("")
	o.SetDefaults()
	c.Name, c.Node, c.SubjectPrefix, c.HeartbeatInterval = o.Name, o.Node, o.SubjectPrefix, o.HeartbeatInterval
	c.SessionReplicas, c.ReplayWindow, c.ReplayMaxBytes = o.SessionReplicas, o.ReplayWindow, o.ReplayMaxBytes
	c.MaxNodes, c.ForgetAfter = o.MaxNodes, o.ForgetAfter
	c.NATS.Embedded.Listen, c.NATS.Embedded.ClientListen = o.Embedded.Listen, o.Embedded.ClientListen
	if len(c.NATS.Embedded.Routes) == 0 {
		c.NATS.Embedded.Routes = nil
	}
	if len(c.NATS.Embedded.Users) == 0 {
		c.NATS.Embedded.Users = nil
	}
	return c
}

// options converts to cluster.Options; JetStream's files go to
// <data_dir>/nats (a temporary directory for data_dir "").
func (c clusterConfig) options(dataDir string) cluster.Options {
	o := cluster.Options{
		Name: c.Name, Node: c.Node, SubjectPrefix: c.SubjectPrefix, Replicas: c.Replicas, HeartbeatInterval: c.HeartbeatInterval,
		SessionReplicas: c.SessionReplicas, ReplayWindow: c.ReplayWindow, ReplayMaxBytes: c.ReplayMaxBytes,
		URL: c.NATS.URL, CredentialsFile: c.NATS.CredentialsFile, User: c.NATS.User, Password: c.NATS.Password,
		Token: c.NATS.Token, CAFile: c.NATS.TLS.CAFile, CertFile: c.NATS.TLS.CertFile, KeyFile: c.NATS.TLS.KeyFile,
		Embedded: cluster.EmbeddedOptions{Listen: c.NATS.Embedded.Listen, ClientListen: c.NATS.Embedded.ClientListen,
			Routes: c.NATS.Embedded.Routes, Advertise: c.NATS.Embedded.Advertise,
			TLS: cluster.EmbeddedTLS{CertFile: c.NATS.Embedded.TLS.CertFile, KeyFile: c.NATS.Embedded.TLS.KeyFile, CAFile: c.NATS.Embedded.TLS.CAFile}},
		MaxNodes: c.MaxNodes, ForgetAfter: c.ForgetAfter,
	}
	// A secret_file that does not read is reported by validateCluster.
	o.Secret, _ = c.secret()
	for _, u := range c.NATS.Embedded.Users {
		o.Embedded.Users = append(o.Embedded.Users, cluster.User{Name: u.Name, Password: u.Password, NKey: u.NKey,
			Publish: u.Publish, Subscribe: u.Subscribe})
	}
	if dataDir != "" {
		o.Embedded.Dir = filepath.Join(dataDir, "nats")
		o.MarksFile = filepath.Join(dataDir, "cluster-marks.json")
	}
	// Each node configured with a bridge runs its local session.
	o.NodeLocalIDs = []string{bridge.UserPrefix}
	return o
}

// secret is the cluster secret: secret, or secret_file's first line.
func (c clusterConfig) secret() (string, error) {
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

// clusterKeys names the key of each cluster.Options field.
var clusterKeys = map[string][]string{
	"Secret": {"secret_file"}, "MaxNodes": {"max_nodes"}, "ForgetAfter": {"forget_after"},
	"Embedded.TLS": {"nats", "embedded", "tls"}, "Embedded.Users": {"nats", "embedded", "users"},
	"Name": {"name"}, "Node": {"node"}, "SubjectPrefix": {"subject_prefix"}, "Replicas": {"replicas"}, "SessionReplicas": {"session_replicas"},
	"CredentialsFile":       {"nats", "credentials_file"},
	"CertFile":              {"nats", "tls", "cert_file"},
	"Embedded.Listen":       {"nats", "embedded", "listen"},
	"Embedded.ClientListen": {"nats", "embedded", "client_listen"},
	"Embedded.Routes":       {"nats", "embedded", "routes"},
	"Embedded.Advertise":    {"nats", "embedded", "advertise"},
	"HeartbeatInterval":     {"heartbeat_interval"},
	"ReplayWindow":          {"replay_window"},
	"ReplayMaxBytes":        {"replay_max_bytes"},
}

// validateCluster checks the cluster section (when enabled) with the
// cluster package's rules, each under its key.
func (c *config) validateCluster(ps *problems) {
	if !c.Cluster.Enabled {
		return
	}
	cp := path("cluster")
	if c.Cluster.Secret != "" && c.Cluster.SecretFile != "" {
		ps.add(cp.with("secret"), "secret and secret_file exclude each other: pick one")
	}
	if _, err := c.Cluster.secret(); err != nil {
		ps.addErr(cp.with("secret_file"), err)
	}
	o := c.Cluster.options(c.DataDir)
	o.SetDefaults()
	for _, err := range unjoin(o.Validate()) {
		var oe *cluster.OptionError
		if errors.As(err, &oe) && clusterKeys[oe.Option] != nil {
			ps.add(cp.with(clusterKeys[oe.Option]...), "%s", oe.Msg)
			continue
		}
		ps.addErr(cp, err)
	}
}

// startCluster starts this node's NATS side when the cluster is enabled;
// nil when it is not.
func startCluster(cfg *config, log *zap.Logger) (*cluster.Cluster, error) {
	if !cfg.Cluster.Enabled {
		return nil, nil
	}
	o := cfg.Cluster.options(cfg.DataDir)
	// A hash strategy holds across nodes: the publisher's node picks the
	// node of a group's member by the same hash.
	switch cfg.Broker.SharedStrategy {
	case core.SharedHashClient:
		o.SharedHash = cluster.SharedHashClient
	case core.SharedHashTopic:
		o.SharedHash = cluster.SharedHashTopic
	}
	return cluster.New(o, log.Named("cluster"))
}

// runClusterCmd is `xmq cluster secret`: a new cluster secret on stdout,
// for cluster.secret_file on every node.
func runClusterCmd(args []string, stdout io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		printClusterUsage(stdout)
		return nil
	}
	if len(args) != 1 || args[0] != "secret" {
		return usageError{fmt.Errorf("cluster: want `xmq cluster secret`, got %q (xmq cluster -h)", args)}
	}
	fmt.Fprintln(stdout, cluster.NewSecret())
	return nil
}

func printClusterUsage(w io.Writer) {
	fmt.Fprint(w, `xmq cluster secret prints a new cluster secret: 32 random bytes, base64.
Every node of a cluster is given the same one, in the file cluster.secret_file
names (or cluster.secret, XMQ_CLUSTER_SECRET); routes that do not present it
are refused.

Usage:
  xmq cluster secret > /etc/xmq/cluster.secret
`)
}
