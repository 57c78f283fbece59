package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
)

// cluster.Store spells out core.Store's methods (cluster does not import
// core): each must satisfy the other, so that a method added to one side
// only fails the build here, rather than leave a store write out of the
// session replicas or the replicas' wrapper out of the broker.
var (
	_ core.Store    = cluster.Store(nil)
	_ cluster.Store = core.Store(nil)
)

// clusterWithDefaults spells out c's defaults (for comparing
// configurations), cluster.Options' own.
func clusterWithDefaults(c config.Cluster) config.Cluster {
	o := clusterOptions(c, "")
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

// clusterOptions converts the cluster section to cluster.Options;
// JetStream's files go to <data_dir>/nats (a temporary directory for
// data_dir "").
func clusterOptions(c config.Cluster, dataDir string) cluster.Options {
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
	o.Secret, _ = c.SecretValue()
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
func validateCluster(c *config.Config, ps *config.Problems) {
	if !c.Cluster.Enabled {
		return
	}
	cp := config.Path("cluster")
	if c.Cluster.Secret != "" && c.Cluster.SecretFile != "" {
		ps.Add(cp.With("secret"), "secret and secret_file exclude each other: pick one")
	}
	if _, err := c.Cluster.SecretValue(); err != nil {
		ps.AddErr(cp.With("secret_file"), err)
	}
	o := clusterOptions(c.Cluster, c.DataDir)
	o.SetDefaults()
	for _, err := range config.Unjoin(o.Validate()) {
		var oe *cluster.OptionError
		if errors.As(err, &oe) && clusterKeys[oe.Option] != nil {
			ps.Add(cp.With(clusterKeys[oe.Option]...), "%s", oe.Msg)
			continue
		}
		ps.AddErr(cp, err)
	}
}

// startCluster starts this node's NATS side when the cluster is enabled;
// nil when it is not.
func startCluster(cfg *config.Config, log *zap.Logger) (*cluster.Cluster, error) {
	if !cfg.Cluster.Enabled {
		return nil, nil
	}
	o := clusterOptions(cfg.Cluster, cfg.DataDir)
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
		return config.UsageError{Err: fmt.Errorf("cluster: want `xmq cluster secret`, got %q (xmq cluster -h)", args)}
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
