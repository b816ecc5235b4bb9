package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release this binary was built from. `make build` and
// `make cli` set it with -ldflags "-X main.version=..." from git describe;
// otherwise it is read from the module's build information.
var version = ""

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stdout)
	if err := parse(fs, args); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "spillway %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// buildVersion is version when the linker set it, else what the build
// information says.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, _ := debug.ReadBuildInfo()
	return versionFromBuildInfo(info)
}

// versionFromBuildInfo is the main module's version (a tag, or the
// pseudo-version go install or a VCS-stamped go build gives), followed by
// the VCS revision and time when the build recorded them; "devel" with a
// hint when it recorded neither (-buildvcs=false, also through GOFLAGS, or
// a build outside a git clone: the go command does not stamp from a git
// worktree).
func versionFromBuildInfo(info *debug.BuildInfo) string {
	if info == nil {
		return "devel (no build information)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev != "" {
		rev = rev[:min(12, len(rev))]
		if settings["vcs.modified"] == "true" {
			rev += "-dirty"
		}
		if t := settings["vcs.time"]; t != "" {
			rev += " " + t
		}
	}
	v := info.Main.Version
	switch {
	case v != "" && v != "(devel)" && rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]):
		// A tag: the revision says which commit it was built from.
		return v + ", " + rev
	case v != "" && v != "(devel)":
		return v
	case rev != "":
		return "devel " + rev
	}
	return "devel, no VCS stamp (make cli names the build; so do go install …@version and go build in a git clone unless -buildvcs=false)"
}
