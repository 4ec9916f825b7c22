// Package version says which build of coordd (or coordctl) is running,
// from what the Go toolchain stamps into the binary: the module's version,
// the VCS revision and whether the tree was modified, and the Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is a build's identity.
type Info struct {
	Version   string // the module's version: a tag, or "(devel)"
	Revision  string // the VCS commit, "unknown" if not stamped; "+dirty" if modified
	GoVersion string
}

// Get returns this binary's Info.
func Get() Info {
	info := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		info.Revision += "+dirty"
	}
	return info
}

// String is the line --version prints: "name version revision goversion".
func String(name string) string {
	i := Get()
	return fmt.Sprintf("%s %s (revision %s, %s)", name, i.Version, i.Revision, i.GoVersion)
}
