package cluster

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the import rules of DESIGN.md: cluster never imports
// core (cmd/xmq hands it the broker as Local), and core never imports
// NATS or cluster (a single node links none of it into its hot path).
func TestImports(t *testing.T) {
	for _, tt := range []struct{ pkg, banned string }{
		{"github.com/xmq-io/xmq/cluster", "github.com/xmq-io/xmq/core"},
		{"github.com/xmq-io/xmq/core", "github.com/nats-io/"},
		{"github.com/xmq-io/xmq/core", "github.com/xmq-io/xmq/cluster"},
	} {
		out, err := exec.Command("go", "list", "-deps", tt.pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, tt.banned) {
				t.Errorf("%s imports %s", tt.pkg, dep)
			}
		}
	}
}
