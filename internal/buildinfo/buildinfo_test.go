package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := func(rev, time, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "xmq", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: time},
				{Key: "vcs.modified", Value: modified}}}
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tt := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
		line                  string
	}{
		{"make: stamped values win", "v0.1.0", "0123456789abcdef0123", "2026-12-01T10:00:00Z",
			vcs("fedcba9876543210", "2026-11-30T00:00:00Z", "false"),
			Info{"v0.1.0", "0123456789abcdef0123", false, "2026-12-01T10:00:00Z", "go1.26.0", platform},
			"v0.1.0 (commit 0123456789ab, 2026-12-01T10:00:00Z, go1.26.0, " + platform + ")"},
		{"make: git describe --dirty", "v0.1.0-3-gabcdef0-dirty", "abcdef0", "2026-12-01T10:00:00Z", nil,
			Info{"v0.1.0-3-gabcdef0-dirty", "abcdef0", true, "2026-12-01T10:00:00Z", runtime.Version(), platform},
			"v0.1.0-3-gabcdef0-dirty (commit abcdef0+dirty, 2026-12-01T10:00:00Z, " + runtime.Version() + ", " + platform + ")"},
		{"go build in a clone: VCS settings", "", "", "",
			vcs("fedcba9876543210ffff", "2026-11-30T00:00:00Z", "true"),
			Info{"devel", "fedcba9876543210ffff", true, "2026-11-30T00:00:00Z", "go1.26.0", platform},
			"devel (commit fedcba987654+dirty, 2026-11-30T00:00:00Z, go1.26.0, " + platform + ")"},
		{"go install module@v0.1.0: module version, no VCS", "", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.0"}},
			Info{"v0.1.0", "", false, "", "go1.26.0", platform},
			"v0.1.0 (go1.26.0, " + platform + ")"},
		{"go build with a tag: Go's own stamp", "", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.1-0.20261201100000-abcdef012345+dirty"}},
			Info{"v0.1.1-0.20261201100000-abcdef012345+dirty", "", true, "", "go1.26.0", platform},
			"v0.1.1-0.20261201100000-abcdef012345+dirty (go1.26.0, " + platform + ")"},
		{"nothing known", "", "", "", nil,
			Info{"devel", "", false, "", runtime.Version(), platform},
			"devel (" + runtime.Version() + ", " + platform + ")"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := get(tt.version, tt.commit, tt.date, tt.bi)
			if got != tt.want {
				t.Errorf("get = %+v\nwant  %+v", got, tt.want)
			}
			if s := got.String(); s != tt.line {
				t.Errorf("String = %q\nwant     %q", s, tt.line)
			}
		})
	}
}

// TestGetReadsThisBinary checks Get against the test binary's own build
// information: go test records the Go version, so it must show.
func TestGetReadsThisBinary(t *testing.T) {
	i := Get("", "", "")
	if i.Version == "" || !strings.HasPrefix(i.GoVersion, "go") || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get = %+v", i)
	}
}
