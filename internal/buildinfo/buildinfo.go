// Package buildinfo says which build of idemgate is running: the release, the revision it was
// built from and the Go version. A release build sets them with the linker
// (-ldflags "-X github.com/idemgate/idemgate/internal/buildinfo.version=v1.4.0
// -X github.com/idemgate/idemgate/internal/buildinfo.revision=<commit>"); otherwise they come
// from what the Go toolchain recorded (a module version for `go install …@v1.4.0`, the VCS
// revision when the build stamped it), and are "devel" and "unknown" when it recorded nothing:
// a build with -buildvcs=false, as on CI machines, must not break the answer.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set by the linker for a release build.
var (
	version  string
	revision string
)

// Info is one build.
type Info struct {
	Version   string `json:"version"`  // a semantic version (v1.4.0), or "devel"
	Revision  string `json:"revision"` // the VCS revision, or "unknown"
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read returns the running build's info.
var Read = sync.OnceValue(func() Info { return read(version, revision, debug.ReadBuildInfo) })

func read(version, revision string, build func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if bi, ok := build(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Revision == "":
				info.Revision = s.Value
			case s.Key == "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}
