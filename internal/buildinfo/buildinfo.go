// Package buildinfo tells which build a binary is: the version, commit and
// date that make stamps with -ldflags -X from the git tag, or, for a plain
// go build or go install, what the Go toolchain recorded in the binary
// (runtime/debug.ReadBuildInfo: the module version, which Go derives from
// the tag, and the VCS revision, time and dirty flag).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes one build.
type Info struct {
	Version   string // v0.1.0, a Go pseudo-version, or "devel"
	Commit    string // the VCS revision; "" when unknown (go install from the module proxy)
	Dirty     bool   // built from a tree with uncommitted changes
	Date      string // the commit's time, RFC 3339, which reproducible builds use as the build date
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// Get returns the build's Info. version, commit and date are the values
// stamped at link time (-X main.version=…); empty ones are taken from the
// build information Go records.
func Get(version, commit, date string) Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, date, bi)
}

func get(version, commit, date string, bi *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit, Date: date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.time":
				if i.Date == "" {
					i.Date = s.Value
				}
			case "vcs.modified":
				i.Dirty = i.Dirty || s.Value == "true"
			}
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
	}
	// git describe --dirty and Go's own stamp both mark a dirty tree.
	i.Dirty = i.Dirty || strings.HasSuffix(i.Version, "-dirty") || strings.HasSuffix(i.Version, "+dirty")
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// String is the one line `xmq version` prints after the program's name:
// "v0.1.0 (commit 1a2b3c4d5e6f, 2026-12-01T10:00:00Z, go1.26.0, linux/amd64)".
// A dirty commit is marked "+dirty"; unknown fields are left out.
func (i Info) String() string {
	parts := make([]string, 0, 4)
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if i.Dirty {
			c += "+dirty"
		}
		parts = append(parts, "commit "+c)
	}
	if i.Date != "" {
		parts = append(parts, i.Date)
	}
	parts = append(parts, i.GoVersion, i.Platform)
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}
