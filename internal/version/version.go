// Package version says which build of rocketraft is running: every binary's --version, its
// start-up banner, the broker's /status JSON and GET_BROKER_RUNTIME_INFO use it, so an operator
// can tell which build a node runs. The Makefile's build target stamps Version, Commit and Date
// with -ldflags -X; an unstamped build (go build, go test) falls back to what the Go toolchain
// recorded (runtime/debug.ReadBuildInfo: module version, vcs.revision, vcs.time).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Stamped at build time by the Makefile:
//
//	-ldflags "-X rocketraft/internal/version.Version=... -X ...Commit=... -X ...Date=..."
var (
	// Version is `git describe --tags --always --dirty` or the VERSION file's content.
	Version = ""
	// Commit is the full commit hash the binary was built from.
	Commit = ""
	// Date is the build time, RFC 3339 UTC.
	Date = ""
)

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Date      string `json:"buildDate"`
}

var (
	once sync.Once
	info Info
)

// Get returns the build's identity: the stamped values, else the toolchain's, else "unknown"
// (never empty fields).
func Get() Info {
	once.Do(func() { info = resolve(Version, Commit, Date, debug.ReadBuildInfo) })
	return info
}

// resolve fills the gaps of the stamped values from the build info read returns.
func resolve(v, commit, date string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: v, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := read(); ok && bi != nil {
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.time":
				if in.Date == "" {
					in.Date = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if in.Version == "" && in.Commit != "" {
			in.Version = "dev-" + short(in.Commit)
			if modified {
				in.Version += "-dirty"
			}
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
	}
	for _, p := range []*string{&in.Version, &in.Commit, &in.Date} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return in
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// String is the one-line form: "rocketraft v0.3.0-12-gabc (commit abc..., go1.24.1, built ...)".
func (i Info) String() string {
	return fmt.Sprintf("rocketraft %s (commit %s, %s, built %s)", i.Version, i.Commit, i.GoVersion, i.Date)
}

// Line is Get().String() prefixed with the program name, what --version prints.
func Line(program string) string { return program + " " + Get().String() }
