// Package importrules_test holds no code of its own: its one test keeps the
// package table of DESIGN.md ("Packages and who may import whom") true of
// the tree, for every package of the module. A package the table does not
// name fails the test, so a new package is added to the table here (and to
// DESIGN.md) when it is created.
package importrules_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/xmq-io/xmq"

// x names a package of the module by its path inside it ("" is the module
// itself, which as a "never" entry means any package of the module).
func x(rel string) string {
	if rel == "" {
		return mod
	}
	return mod + "/" + rel
}

// row is one line of the table. Only non-test imports are checked: DESIGN.md
// lets tests import more.
type row struct {
	pkgs []string // the row's packages; they may import each other
	// may lists the module packages the row may import directly, besides its
	// own and the helpers; any lifts the limit (the commands). The table's
	// "may import" third-party lists are examples (auth's JWT library, the
	// NATS nkeys that cluster needs), so only the module's own packages are
	// held to it.
	may []string
	any bool
	// never is checked transitively: a package reached through another
	// module package or a library is linked in just the same ("a single node
	// links none of it"). An entry matches the path and everything under it.
	never []string
	// neverDirect is checked on the row's own imports only: core may not
	// import net/http itself, but zap, which core may import, does.
	neverDirect []string
	stdOnly     bool // "standard library | anything else", transitively
	target      bool // named by DESIGN.md as a target of issue 25; may not exist yet
}

// table is DESIGN.md's table, row by row.
var table = []row{
	{pkgs: []string{x("codec"), x("codec/codectest")}, stdOnly: true},
	{pkgs: []string{x("internal/sockio")}, never: []string{x("")}},
	{pkgs: []string{x("internal/buildinfo")}, never: []string{x("")}},
	{pkgs: []string{x("listeners")}, may: []string{x("internal/sockio")},
		never: []string{x("core"), x("codec")}},
	{pkgs: []string{x("core")}, may: []string{x("codec"), x("internal/sockio")},
		never: []string{x("listeners"), x("store"), x("cluster"), x("bridge"), x("auth"), x("web"),
			"github.com/gorilla", "github.com/quic-go", "github.com/nats-io"},
		neverDirect: []string{"net/http"}},
	{pkgs: []string{x("store")}, never: []string{x("core")}},
	{pkgs: []string{x("auth")}, may: []string{x("codec")}, never: []string{x("core")}},
	{pkgs: []string{x("certs"), x("certs/certstest")}, never: []string{x("core"), x("listeners")}},
	{pkgs: []string{x("cluster")}, may: []string{x("codec")}, never: []string{x("core")}},
	{pkgs: []string{x("bridge")}, may: []string{x("codec"), x("listeners")}, never: []string{x("core")}},
	{pkgs: []string{x("internal/bridgelocal")}, may: []string{x("bridge"), x("core")}},
	{pkgs: []string{x("web")}, may: []string{x("core"), x("codec")},
		never: []string{x("listeners"), x("store"), x("auth"), x("bridge"), x("cluster")}},
	{pkgs: []string{x("loadtest")}, may: []string{x("codec"), x("listeners")}, never: []string{x("core")}},
	{pkgs: []string{x("internal/mqtttest"), x("internal/testbrowser")}, may: []string{x("codec"), x("listeners")},
		never: []string{x("core")}},
	// internal/config imports the option types (and their checks) of the
	// packages it configures; never web or cluster, which link a server
	// (their sections' rules come from cmd/xmq as config.Checks), nor what
	// builds on it. "Starting nothing" is no import rule: its tests keep it
	// data only.
	{pkgs: []string{x("internal/config")},
		may: []string{x("core"), x("auth"), x("store"), x("bridge"), x("listeners"), x("certs")},
		never: []string{x("cmd"), x("web"), x("cluster"), x("internal/mosquitto"), x("internal/bridgelocal"),
			"github.com/nats-io"}},
	// internal/mosquitto writes the configuration document; besides the
	// file formats (auth), it names the constants of what it configures
	// (listeners' transports, bridge's protocols, certs' cipher suites).
	// What config links (core, through the option types) it links too:
	// "never core" is held to its own imports.
	{pkgs: []string{x("internal/mosquitto")},
		may:   []string{x("internal/config"), x("auth"), x("bridge"), x("certs"), x("codec"), x("listeners")},
		never: []string{x("cmd"), x("web"), x("cluster"), "github.com/nats-io"}, neverDirect: []string{x("core")}},
	// internal/logging builds the process logger from config.Log (zap,
	// lumberjack, syslog, the journal); the broker's packages take a
	// *zap.Logger and never import it. What config links (core, through the
	// option types) it links too: "never core" is held to its own imports.
	{pkgs: []string{x("internal/logging")}, may: []string{x("internal/config")},
		never: []string{x("cmd"), x("web"), x("cluster"), x("internal/mosquitto"), x("internal/bridgelocal"),
			"github.com/nats-io"},
		neverDirect: []string{x("core")}},
	{pkgs: []string{x("cmd/xmq"), x("cmd/loadtest")}, any: true},
}

// helpers are the packages any row may import although its "may import"
// cell does not name them: small leaves DESIGN.md is silent about.
var helpers = []string{
	x("internal/atomicfile"), // write-to-temp-and-rename, shared by certs and web
}

// unlisted are the packages DESIGN.md's table is silent about, each with the
// rule it is held to here and why it is not a row there.
var unlisted = []row{
	// A standard-library leaf (see helpers): it must stay one.
	{pkgs: []string{x("internal/atomicfile")}, stdOnly: true},
	// Test fixtures of the configuration (a file in a temporary
	// directory), imported by tests only.
	{pkgs: []string{x("internal/config/configtest")}, stdOnly: true},
	// Test-only directories: no non-test code, so nothing to import.
	{pkgs: []string{x("e2e"), x("deploy"), x("internal/importrules")}, never: []string{x("")}},
	// Release tooling run by make (archives, the man page), not part of the
	// broker. They import no module package today; one that comes to need one
	// gets a row in DESIGN.md first.
	{pkgs: []string{x("scripts/archive"), x("scripts/genman")}, never: []string{x("")}},
}

// exceptions are violations of DESIGN.md the tree has today, each named and
// explained, keyed by "package -> entry": the "never" entry broken, "std"
// for a standard-library row, or the module package imported beyond "may".
// An exception that no longer happens fails the test, so the list only
// shrinks. None at the time of writing (main at 5026101).
var exceptions = map[string]string{}

// pkg is the part of `go list -json` the test reads.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

// TestImportRules checks every package of the module against its row: the
// "never imports" column transitively (with the chain that brings the
// package in), "standard library" rows transitively, and the module
// packages each row may import directly. It fails for a module package no
// row names, and for a row whose package is gone.
func TestImportRules(t *testing.T) {
	graph, inModule := load(t, runtime.GOOS)

	rows := append(slices.Clone(table), unlisted...)
	named := map[string]bool{}
	for _, r := range rows {
		for _, p := range r.pkgs {
			named[p] = true
			if _, ok := graph[p]; !ok && !r.target {
				t.Errorf("%s is in the table but not in the module: drop its row", p)
			}
		}
	}
	for _, p := range inModule {
		if !named[p] {
			t.Errorf("%s is in no row: add it to DESIGN.md's package table and to this test's table", p)
		}
	}

	// The imports again for each platform the tree builds on (Makefile's
	// vet-cross): files behind build tags import differently.
	used := map[string]bool{}
	for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
		if goos != runtime.GOOS {
			graph, _ = load(t, goos)
		}
		for _, r := range rows {
			for _, p := range r.pkgs {
				if _, ok := graph[p]; !ok {
					continue
				}
				for _, v := range check(r, p, graph) {
					key := p + " -> " + v.entry
					if _, ok := exceptions[key]; ok {
						used[key] = true
						continue
					}
					t.Errorf("%s (GOOS=%s): %s", v.rule, goos, strings.Join(v.chain, " -> "))
				}
			}
		}
	}
	for key := range exceptions {
		if !used[key] {
			t.Errorf("exception %q no longer happens: remove it", key)
		}
	}
}

type violation struct {
	rule  string   // what the table says
	entry string   // the rule entry, to key exceptions
	chain []string // from the package to the offending import
}

// check returns the violations of r by the package p.
func check(r row, p string, graph map[string]*pkg) []violation {
	var out []violation
	chains := paths(p, graph)
	reached := make([]string, 0, len(chains))
	for dep := range chains {
		reached = append(reached, dep)
	}
	// Shortest chain first, then by name, so the report is stable and the
	// first match of an entry is the nearest one.
	slices.SortFunc(reached, func(a, b string) int {
		if d := len(chains[a]) - len(chains[b]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, e := range r.never {
		for _, dep := range reached {
			if under(dep, e) && !slices.Contains(r.pkgs, dep) {
				out = append(out, violation{p + " never imports " + e, e, chains[dep]})
				break
			}
		}
	}
	if r.stdOnly {
		for _, dep := range reached {
			if d := graph[dep]; d != nil && !d.Standard && !slices.Contains(r.pkgs, dep) {
				out = append(out, violation{p + " imports the standard library only", "std", chains[dep]})
				break
			}
		}
	}
	for _, imp := range graph[p].Imports {
		for _, e := range r.neverDirect {
			if under(imp, e) {
				out = append(out, violation{p + " never imports " + e + " itself", e, []string{p, imp}})
			}
		}
		if r.any || !under(imp, mod) || slices.Contains(r.pkgs, imp) ||
			slices.Contains(r.may, imp) || slices.Contains(helpers, imp) {
			continue
		}
		out = append(out, violation{p + " may import only " + strings.Join(append(slices.Clone(r.may), helpers...), ", ") +
			" of the module", imp, []string{p, imp}})
	}
	return out
}

// paths returns, for every package p depends on, a shortest import chain
// from p to it (breadth first over the non-test imports).
func paths(p string, graph map[string]*pkg) map[string][]string {
	chains := map[string][]string{}
	queue := [][]string{{p}}
	seen := map[string]bool{p: true}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		n := graph[c[len(c)-1]]
		if n == nil {
			continue
		}
		for _, imp := range n.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			next := append(slices.Clone(c), imp)
			chains[imp] = next
			queue = append(queue, next)
		}
	}
	return chains
}

// under reports whether path is prefix or a package below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// load lists the module's packages and everything they import, as `go list`
// sees them for goos (static, as make release builds).
func load(t *testing.T, goos string) (map[string]*pkg, []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "-deps", mod+"/...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0") // as make release builds
	out, err := cmd.Output()
	if errors.Is(err, exec.ErrNotFound) {
		t.Skipf("go list: %v", err)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	graph := map[string]*pkg{}
	var inModule []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		graph[p.ImportPath] = &p
		if under(p.ImportPath, mod) {
			inModule = append(inModule, p.ImportPath)
		}
	}
	return graph, inModule
}
