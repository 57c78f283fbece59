package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/web"
)

// TestRunBansSurviveRestart: a ban set through the admin API is in force
// after xmq restarts on the same data directory, and lifted for good
// through the API too; without a data directory bans are not kept.
func TestRunBansSurviveRestart(t *testing.T) {
	// An admin API key and a cheap admin hash: no slow bcrypt per start or
	// request under the race detector.
	t.Setenv(config.AdminPasswordEnv, "")
	key, sum := web.NewAPIKey()
	hash, err := bcrypt.GenerateFromPassword([]byte("unused"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, webRunConfig+"web:\n  admin_password_hash: '"+string(hash)+"'\n  api_keys:\n    test: {sha256: "+sum+", role: admin}\n")
	dir := t.TempDir()
	call := func(base, method, path, body string) (int, []any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var page struct{ Items []any }
		_ = json.NewDecoder(res.Body).Decode(&page)
		return res.StatusCode, page.Items
	}
	banned := func(base string) []any {
		t.Helper()
		code, items := call(base, "GET", "/api/v1/banned", "")
		if code != 200 {
			t.Fatalf("banned list: %d", code)
		}
		return items
	}

	b, base := startWebRun(t, "-c", cfg, "-data", dir)
	if code, _ := call(base, "POST", "/api/v1/banned", `{"kind":"client_id","value":"auth-test","reason":"test","duration":"1h"}`); code != 201 {
		t.Fatalf("ban: %d", code)
	}
	if code, _ := call(base, "POST", "/api/v1/banned", `{"kind":"ip","value":"203.0.113.0/24"}`); code != 201 {
		t.Fatalf("ban: %d", code)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}

	b, base = startWebRun(t, "-c", cfg, "-data", dir)
	items := banned(base)
	if len(items) != 2 || items[0].(map[string]any)["value"] != "auth-test" || items[0].(map[string]any)["until"] == nil {
		t.Fatalf("banned list after a restart: %v", items)
	}
	if rc := connack(t, b.addrs[0].String(), "", ""); rc != codec.Banned {
		t.Errorf("banned client id after a restart: CONNACK %v, want Banned", rc)
	}
	if code, _ := call(base, "DELETE", "/api/v1/banned/client_id/auth-test", ""); code != 200 {
		t.Fatalf("unban: %d", code)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}

	b, base = startWebRun(t, "-c", cfg, "-data", dir)
	if items := banned(base); len(items) != 1 || items[0].(map[string]any)["value"] != "203.0.113.0/24" {
		t.Errorf("after unban and a restart: %v, want the address ban only", items)
	}
	if rc := connack(t, b.addrs[0].String(), "", ""); rc != codec.Success {
		t.Errorf("lifted ban came back after a restart: CONNACK %v", rc)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}

	// In memory (-data ""): a ban lasts as long as the process.
	b, base = startWebRun(t, "-c", cfg, "-data", "")
	if code, _ := call(base, "POST", "/api/v1/banned", `{"kind":"username","value":"mallory"}`); code != 201 {
		t.Fatalf("ban: %d", code)
	}
	if err := b.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	_, base = startWebRun(t, "-c", cfg, "-data", "")
	if items := banned(base); len(items) != 0 {
		t.Errorf("bans kept without a data directory: %v", items)
	}
}
