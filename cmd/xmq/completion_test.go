package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// completionScript writes `xmq completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out bytes.Buffer
	if err := runCompletion([]string{shell}, &out); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "xmq."+shell)
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// needShell finds a shell, skipping without it except in CI (.ci/deps
// installs bash, zsh and fish there).
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (make deps)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

func TestCompletionSyntax(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			sh := needShell(t, shell)
			if out, err := exec.Command(sh, "-n", completionScript(t, shell)).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

// completionCases are command lines being typed (the last word is the one
// completed) and words the completion must offer and must not.
var completionCases = []struct {
	line      string
	want, not []string
}{
	{"xmq ", []string{"certs", "config", "completion", "health", "passwd", "store", "version"}, nil},
	{"xmq -", []string{"-config", "-listen", "-data", "-log-level", "-version", "-web", "-password-file"}, []string{"certs"}},
	{"xmq -log-level ", []string{"debug", "info", "warn", "error"}, []string{"-data"}},
	{"xmq -c xmq.yaml -", []string{"-listen"}, nil},
	{"xmq -c xmq.yaml ", nil, []string{"certs"}}, // a subcommand comes first or not at all
	{"xmq store ", []string{"check"}, nil},
	{"xmq config ", []string{"print", "env"}, nil},
	{"xmq config print -", []string{"-config", "-listen"}, nil},
	{"xmq certs -", []string{"-regen", "-client", "-data"}, []string{"-listen"}},
	{"xmq passwd -", []string{"-b", "-D", "-H", "-scram"}, nil},
	{"xmq passwd -H ", []string{"bcrypt", "sha512-pbkdf2"}, nil},
	{"xmq health -", []string{"-url", "-timeout", "-config"}, nil},
	{"xmq completion ", []string{"bash", "zsh", "fish"}, nil},
}

func checkOffered(t *testing.T, line string, got, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%q: %q not offered; got %q", line, w, got)
		}
	}
	for _, w := range not {
		if slices.Contains(got, w) {
			t.Errorf("%q: %q offered; got %q", line, w, got)
		}
	}
}

// TestCompletionBash runs the bash function the way bash's completion does.
func TestCompletionBash(t *testing.T) {
	sh := needShell(t, "bash")
	script := completionScript(t, "bash")
	for _, tc := range completionCases {
		t.Run(tc.line, func(t *testing.T) {
			words := strings.Fields(tc.line)
			if strings.HasSuffix(tc.line, " ") {
				words = append(words, "")
			}
			var quoted []string
			for _, w := range words {
				quoted = append(quoted, "'"+w+"'")
			}
			// compopt works only inside real completion; the test needs
			// the words, not the display options.
			prog := `compopt() { :; }; source "$1"; COMP_WORDS=(` + strings.Join(quoted, " ") + `); ` +
				`COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _xmq; printf '%s\n' "${COMPREPLY[@]}"`
			out, err := exec.Command(sh, "-c", prog, "bash", script).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			checkOffered(t, tc.line, strings.Fields(string(out)), tc.want, tc.not)
		})
	}
}

// TestCompletionFish asks fish itself (complete -C) what it would offer.
func TestCompletionFish(t *testing.T) {
	sh := needShell(t, "fish")
	script := completionScript(t, "fish")
	for _, tc := range completionCases {
		t.Run(tc.line, func(t *testing.T) {
			out, err := exec.Command(sh, "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", script, tc.line).CombinedOutput()
			if err != nil {
				t.Fatalf("fish: %v\n%s", err, out)
			}
			var got []string
			for l := range strings.Lines(string(out)) {
				w, _, _ := strings.Cut(strings.TrimSpace(l), "\t")
				got = append(got, w)
			}
			checkOffered(t, tc.line, got, tc.want, tc.not)
		})
	}
}

// TestCompletionCoversCommands keeps the completion's command tree equal to
// the commands the help lists, and passwdFlags equal to passwd's help.
func TestCompletionCoversCommands(t *testing.T) {
	var help bytes.Buffer
	printUsage(&help)
	var inHelp []string
	for _, m := range regexp.MustCompile(`(?m)^  xmq ([a-z][a-z-]*)`).FindAllStringSubmatch(help.String(), -1) {
		if !slices.Contains(inHelp, m[1]) {
			inHelp = append(inHelp, m[1])
		}
	}
	var inTree []string
	for _, c := range xmqCommands().sub {
		inTree = append(inTree, c.name)
	}
	slices.Sort(inHelp)
	slices.Sort(inTree)
	if !slices.Equal(inHelp, inTree) {
		t.Errorf("help lists commands %q, completion %q", inHelp, inTree)
	}

	var ph bytes.Buffer
	if err := passwdMain([]string{"-h"}, nil, &ph, &ph); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?:^|[\s\[])-([A-Za-z][a-z-]*)`).FindAllStringSubmatch(ph.String(), -1) {
		if !slices.Contains(documented, m[1]) {
			documented = append(documented, m[1])
		}
	}
	var completed []string
	for _, f := range passwdFlags {
		completed = append(completed, f.name)
	}
	slices.Sort(documented)
	slices.Sort(completed)
	if !slices.Equal(documented, completed) {
		t.Errorf("xmq passwd -h documents %q, completion has %q", documented, completed)
	}
}

func TestCompletionCommand(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{nil, {"tcsh"}, {"bash", "zsh"}} {
		if err := runCompletion(args, &out); err == nil {
			t.Errorf("completion %q succeeded", args)
		}
	}
	if err := runCompletion([]string{"-h"}, &out); err != nil || !strings.Contains(out.String(), "source <(xmq completion bash)") {
		t.Errorf("completion -h: %v\n%s", err, out.String())
	}
}
