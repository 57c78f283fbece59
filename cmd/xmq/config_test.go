package main

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/config/configtest"
)

const examplePath = "../../xmq.example.yaml"

// coreDefaults returns core's default Options, Version aside, by asking a
// Server built from zero Options.
func coreDefaults(t *testing.T) core.Options {
	t.Helper()
	srv, err := core.New(core.Options{}, core.Config{})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	opts := srv.Options()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	opts.Version = ""
	return opts
}

// writeFile writes a configuration file in a temporary directory.
var writeFile = configtest.WriteFile

func mustLoad(t *testing.T, args ...string) config.Config {
	t.Helper()
	cfg, err := loadConfig(args)
	if err != nil {
		t.Fatalf("loadConfig(%q): %v", args, err)
	}
	return cfg
}

// TestExampleIsDefault keeps xmq.example.yaml from drifting: loading it
// must give exactly the configuration of a bare `xmq`, and its broker
// section must spell out core's defaults.
func TestExampleIsDefault(t *testing.T) {
	got := mustLoad(t, "-c", examplePath)
	want := mustLoad(t)
	if !reflect.DeepEqual(got.Listeners, want.Listeners) || got.DataDir != want.DataDir || got.Log != want.Log {
		t.Errorf("example file gives\n  %+v\nwant the defaults\n  %+v", got, want)
	}
	if got, want := got.Store.WithDefaults(), want.Store.WithDefaults(); got != want {
		t.Errorf("example store section gives %+v, want the defaults %+v", got, want)
	}
	if got, want := clusterWithDefaults(got.Cluster), clusterWithDefaults(want.Cluster); !reflect.DeepEqual(got, want) {
		t.Errorf("example cluster section gives %+v, want the defaults %+v", got, want)
	}
	if got.Cluster.Name != cluster.DefaultName || got.Cluster.SubjectPrefix != cluster.DefaultSubjectPrefix ||
		got.Cluster.NATS.Embedded.Listen != cluster.DefaultListen || got.Cluster.NATS.Embedded.ClientListen != "" {
		t.Errorf("example cluster section does not spell out the cluster package's defaults: %+v", got.Cluster)
	}
	if opts, def := got.Broker.Options(), coreDefaults(t); opts != def {
		t.Errorf("example broker section gives\n  %+v\nwant core's defaults\n  %+v", opts, def)
	}
	// The example shows a bridge with every key, disabled: like a bare
	// xmq, the example starts none. Its settings are bridge's defaults.
	bcs := got.BridgeConfigs()
	for i := range bcs {
		if !bcs[i].Disabled {
			t.Errorf("example bridge %s is enabled", bcs[i].Name)
		}
		withDefaults := bcs[i]
		withDefaults.SetDefaults()
		bcs[i].ClientID = withDefaults.ClientID // HOSTNAME.NAME: "" in the file
		if !reflect.DeepEqual(bcs[i], withDefaults) {
			t.Errorf("example bridge gives\n  %+v\nwant bridge's defaults\n  %+v", bcs[i], withDefaults)
		}
	}
}

// TestClusterConfigErrors: the cluster section is checked by cmd/xmq
// (validateCluster), with the cluster package's rules.
func TestClusterConfigErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, err string }{
		{"cluster node name", "cluster:\n  enabled: true\n  node: a.b\n", `cluster.node: "a.b" must be letters, digits`},
		{"cluster route", "cluster:\n  enabled: true\n  nats:\n    embedded:\n      routes: [nohost]\n", `cluster.nats.embedded.routes: "nohost"`},
		{"cluster replicas", "cluster:\n  enabled: true\n  replicas: 7\n", "cluster.replicas: 7 is not from 0"},
		{"cluster session replicas", "cluster:\n  enabled: true\n  session_replicas: 4\n", "cluster.session_replicas: 4 is not from 1"},
		{"cluster heartbeat", "cluster:\n  enabled: true\n  heartbeat_interval: 10ms\n", "cluster.heartbeat_interval: 10ms is not from 100ms to 1m"},
		{"cluster advertise", "cluster:\n  enabled: true\n  nats:\n    embedded:\n      advertise: nohost\n", `cluster.nats.embedded.advertise: "nohost"`},
		{"cluster credentials and user", "cluster:\n  enabled: true\n  nats:\n    url: nats://h\n    credentials_file: c\n    user: u\n", "cluster.nats.credentials_file: credentials_file excludes user"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := loadConfig([]string{"-c", writeFile(t, tt.file)}); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one containing %q", tt.file, err, tt.err)
			}
		})
	}
}
