package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what `berth version` reports: the module version, the Go
// toolchain and the VCS revision the binary was built from (absent when
// built with -buildvcs=false or outside a checkout).
type buildInfo struct {
	Version, GoVersion, Revision, Time string
	Modified                           bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(unknown)", GoVersion: runtime.Version(), Revision: "(unknown)"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionLine is `berth --version`'s one line.
func versionLine() string {
	b := readBuildInfo()
	line := fmt.Sprintf("%s (%s, revision %s", b.Version, b.GoVersion, b.Revision)
	if b.Modified {
		line += ", modified"
	}
	return line + ")"
}

func newVersionCmd(s *streams) *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "the version, Go toolchain and VCS revision this binary was built from",
		Args:  exactArgs(),
	}
	p := addPrinter(c, s, "version", "go_version", "revision", "revision_time", "modified")
	c.RunE = func(*cobra.Command, []string) error {
		b := readBuildInfo()
		var at any
		if b.Time != "" {
			at = b.Time
		}
		return p.record(b.Version, b.GoVersion, b.Revision, at, b.Modified)
	}
	return c
}
