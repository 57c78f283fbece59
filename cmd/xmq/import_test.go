package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/mosquitto"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestImportCommand runs `xmq import` as a user does.
func TestImportCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"import", "../../internal/mosquitto/testdata/bridge.conf"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "# xmq configuration converted from") || !strings.Contains(stderr.String(), "carried over") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	outFile := filepath.Join(t.TempDir(), "xmq.yaml")
	stdout.Reset()
	if err := run(context.Background(), []string{"import", "-o", outFile, "../../internal/mosquitto/testdata/debian.conf"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig([]string{"-c", outFile}); err != nil || stdout.Len() != 0 {
		t.Errorf("-o file: %v, stdout %q", err, stdout.String())
	}
	for _, args := range [][]string{{"import"}, {"import", "a.conf", "b.conf"}, {"import", "-x", "a.conf"}} {
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("xmq %q succeeded", args)
		} else if _, ok := err.(config.UsageError); !ok {
			t.Errorf("xmq %q: %v is not a usage error", args, err)
		}
	}
	if err := run(context.Background(), []string{"import", "/nonexistent.conf"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "/nonexistent.conf") {
		t.Errorf("missing file: %v", err)
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"import", "-h"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "xmq import") {
		t.Errorf("-h: %v\n%s", err, stdout.String())
	}
}

// TestImportedConfigServes converts a Mosquitto configuration with an
// MQTT and a WebSocket listener and Mosquitto's password file, starts xmq
// with the result and logs in as Mosquitto's clients would: over TCP and
// over WebSocket at "/", a path Mosquitto answers and xmq's default /mqtt
// would refuse; anonymous clients are refused, as Mosquitto 2 does.
func TestImportedConfigServes(t *testing.T) {
	tcp, ws := mqtttest.FreePort(t), mqtttest.FreePort(t)
	conf := writeFile(t, fmt.Sprintf("listener %d 127.0.0.1\nlistener %d 127.0.0.1\nprotocol websockets\npassword_file %s\n",
		tcp, ws, passwordFile(t)))
	out := filepath.Join(t.TempDir(), "xmq.yaml")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"import", "-o", out, conf}, &stdout, &stderr); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr.String())
	}
	b := startRun(t, "-c", out, "-data", "", "-web", "")
	t.Cleanup(func() { _ = b.stop(t) })
	if rc := connack(t, fmt.Sprintf("127.0.0.1:%d", tcp), "bob", "hunter2"); rc != codec.Success {
		t.Errorf("bob over TCP: %v", rc)
	}
	if rc := connack(t, fmt.Sprintf("127.0.0.1:%d", tcp), "", ""); rc == codec.Success {
		t.Error("an anonymous client got in; Mosquitto 2 refuses it")
	}
	for _, path := range []string{"/", "/mqtt"} {
		if status, rc := wsConnack(t, fmt.Sprintf("ws://127.0.0.1:%d%s", ws, path), "", "bob", "hunter2"); status != http.StatusSwitchingProtocols || rc != codec.Success {
			t.Errorf("bob over WebSocket at %s: HTTP %d, %v", path, status, rc)
		}
	}
}

// sparseFile makes a file of size bytes that takes no room on disk.
func sparseFile(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestImportRefusesLargeInput: a file over 16 MiB, alone or with the
// files read before it, is refused before it is read, with an error that
// names it and the limit (internal/mosquitto's TestImportRefusesEndlessInput
// has a pipe).
func TestImportRefusesLargeInput(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.conf")
	sparseFile(t, big, mosquitto.MaxConfBytes+1)
	inc := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(inc, 0o700); err != nil {
		t.Fatal(err)
	}
	sparseFile(t, filepath.Join(inc, "a.conf"), 9<<20)
	sparseFile(t, filepath.Join(inc, "b.conf"), 9<<20)
	sparseFile(t, filepath.Join(inc, "big.txt"), 64<<20) // not a .conf: not read, not counted
	alone := filepath.Join(dir, "alone.d")
	if err := os.Mkdir(alone, 0o700); err != nil {
		t.Fatal(err)
	}
	sparseFile(t, filepath.Join(alone, "huge.conf"), 20<<20)
	tests := []struct {
		name, file string
		want       []string
	}{
		{"main file", big, []string{big + " is larger than 16 MiB", "is it a Mosquitto configuration?"}},
		{"include_dir in all", writeFile(t, "listener 1883\ninclude_dir "+inc+"\n"),
			[]string{"include_dir: " + filepath.Join(inc, "b.conf") + " takes the configuration and its include_dir files past 16 MiB"}},
		{"one included file", writeFile(t, "include_dir "+alone+"\n"),
			[]string{"include_dir: " + filepath.Join(alone, "huge.conf") + " is larger than 16 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"import", tt.file}, &stdout, &stderr)
			if err == nil {
				t.Fatalf("import succeeded:\n%s", stdout.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote output for a refused input:\n%.500s", stdout.String())
			}
		})
	}
}

// TestImportShowsNoForeignContent: include_dir reads the files ending in
// .conf only, as Mosquitto does, and the output quotes nothing of a file
// that is no Mosquitto configuration, nor the value of an unknown option:
// include_dir /etc, a secret left in a .conf file, a misspelt
// remote_password. A main file with no Mosquitto option is refused, its
// content unquoted.
func TestImportShowsNoForeignContent(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"secret.txt":  "AWS_SECRET_ACCESS_KEY=leak-1\n",               // not a .conf: not read
		".conf":       "listener 1\nleak-2\n",                         // nothing before .conf: not read
		"resolv.conf": "nameserver 10.9.8.7\nsearch leak-3.example\n", // no Mosquitto option in it
		"shadow.conf": "root:$6$leak-4$x:19000:0:99999:7:::\n",
		"mqtt.conf":   "listener 1883\nremote_pasword leak-5\nTOKEN=leak-6\n\tleak-7 more\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.conf"), 0o700); err != nil { // a directory: not read
		t.Fatal(err)
	}
	main := writeFile(t, "include_dir "+dir+"\n")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"import", main}, &stdout, &stderr); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, leak := range []string{"leak-", "10.9.8.7", "nameserver", "AWS_SECRET", "TOKEN", "root:"} {
		if strings.Contains(out, leak) {
			t.Errorf("the output quotes %q of a file that is no configuration:\n%s", leak, out)
		}
	}
	for _, want := range []string{
		"With the files of its include_dir: " + filepath.Join(dir, "mqtt.conf"),
		"#   resolv.conf\n#     no line of this file is a Mosquitto option, and none is shown",
		"#   shadow.conf\n#     no line of this file is a Mosquitto option, and none is shown",
		"mqtt.conf:2: remote_pasword\n#     not a Mosquitto 2.0 option",
		"mqtt.conf:3: (no option name; the line is not shown)\n#     not an option line",
		"mqtt.conf:4: (no option name; the line is not shown)", // after a tab, its first word is no option name either
		"address: :1883 # mqtt.conf:1: listener 1883",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}

	shadow := writeFile(t, "root:$6$leak-8$x:19000:0:99999:7:::\nsk-live-leak-9\n")
	stdout.Reset()
	err := run(context.Background(), []string{"import", shadow}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), shadow+": no line of it is a Mosquitto option") || strings.Contains(err.Error(), "leak") {
		t.Errorf("a main file that is no configuration: %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("wrote output for it:\n%s", stdout.String())
	}
}
