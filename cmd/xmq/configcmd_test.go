package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/internal/config"
)

// TestConfigPrintRoundTrips loads a configuration from a file, the
// environment and flags, prints it, and loads the printout alone: the same
// configuration, every default spelled out.
func TestConfigPrintRoundTrips(t *testing.T) {
	file := writeFile(t, "broker:\n  max_queued: 10\nauth:\n  max_failed_logins: -1\nstore:\n  durability: interval\n")
	env := []string{"XMQ_BROKER_MAX_QUEUED=5000", "XMQ_LISTENERS_0_ADDRESS=127.0.0.1:1884", "XMQ_ACME_DOMAINS=a.example"}
	var out bytes.Buffer
	if err := runConfig([]string{"print", "-c", file, "-data", "/srv/xmq", "-log-level", "debug"}, env, &out); err != nil {
		t.Fatal(err)
	}
	printed := out.String()
	for _, want := range []string{
		"max_queued: 5000 # XMQ_BROKER_MAX_QUEUED\n",
		"address: 127.0.0.1:1884 # XMQ_LISTENERS_0_ADDRESS\n",
		"data_dir: /srv/xmq # -data\n",
		"level: debug # -log-level\n",
		"max_failed_logins: -1\n",                        // from the file
		"receive_maximum: 1024\n",                        // core's default, spelled out
		"failed_login_window: 1m0s\n",                    // auth's
		"flush_interval: 100ms\n",                        // the store's
		"durability: interval\n",                         // the file's
		"domains: # XMQ_ACME_DOMAINS\n    - a.example\n", // a list from the environment
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("config print lacks %q:\n%s", want, printed)
		}
	}
	orig, _, err := loadConfigEnv([]string{"-c", file, "-data", "/srv/xmq", "-log-level", "debug"}, env)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := loadConfigEnv([]string{"-c", writeFile(t, printed)}, nil)
	if err != nil {
		t.Fatalf("loading the printout: %v\n%s", err, printed)
	}
	if want := config.Effective(orig); !reflect.DeepEqual(again, want) {
		t.Errorf("printout loads as\n  %+v\nwant\n  %+v", again, want)
	}
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	hash := "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"
	sum := strings.Repeat("5e", 32)
	file := writeFile(t, "web:\n  admin_password_hash: "+hash+"\n  api_keys:\n    grafana:\n      sha256: "+sum+"\n      role: viewer\n"+
		"bridges:\n  - {name: cloud, addresses: [mqtt://127.0.0.1:1883], username: u, password: bridge-pass-do-not-print, topics: [{topic: a/#}]}\n")
	var out bytes.Buffer
	if err := runConfig([]string{"print", "-c", file}, []string{"XMQ_WEB_API_KEYS_CI_SHA256=" + sum, "XMQ_WEB_API_KEYS_CI_ROLE=admin"}, &out); err != nil {
		t.Fatal(err)
	}
	printed := out.String()
	if strings.Contains(printed, hash) || strings.Contains(printed, sum) || strings.Count(printed, config.SecretMask) != 4 {
		t.Errorf("secrets not masked:\n%s", printed)
	}
	if !strings.Contains(printed, "role: viewer") || !strings.Contains(printed, "role: admin # XMQ_WEB_API_KEYS_CI_ROLE") {
		t.Errorf("api key roles missing:\n%s", printed)
	}
	if strings.Contains(printed, "bridge-pass-do-not-print") {
		t.Errorf("a bridge password printed:\n%s", printed)
	}
	out.Reset()
	if err := runConfig([]string{"print", "-show-secrets", "-c", file}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), hash) || !strings.Contains(out.String(), "bridge-pass-do-not-print") || strings.Contains(out.String(), config.SecretMask) {
		t.Errorf("-show-secrets did not print the secrets:\n%s", out.String())
	}
}

func TestConfigCommand(t *testing.T) {
	var out bytes.Buffer
	if err := runConfig([]string{"env"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"XMQ_BROKER_MAX_QUEUED", "broker.max_queued", "XMQ_LISTENERS_<N>_ADDRESS", "XMQ_WEB_API_KEYS_<NAME>_ROLE", "XMQ_ADMIN_PASSWORD"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config env lacks %q", want)
		}
	}
	for _, tt := range []struct {
		args []string
		env  []string
		err  string
	}{
		{nil, nil, "usage: xmq config"},
		{[]string{"show"}, nil, `unknown command "show"`},
		{[]string{"env", "x"}, nil, "no arguments"},
		{[]string{"print"}, []string{"XMQ_BROKER_MAX_QUEUD=1"}, "closest: XMQ_BROKER_MAX_QUEUED"},
		{[]string{"print", "-nope"}, nil, "-nope"},
	} {
		if err := runConfig(tt.args, tt.env, &out); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("config %q: %v, want an error containing %q", tt.args, err, tt.err)
		}
	}
}
