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
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"revision"`
	Time      string `json:"revision_time,omitempty"`
	Modified  bool   `json:"modified"`
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
	return &cobra.Command{
		Use:   "version",
		Short: "the version, Go toolchain and VCS revision this binary was built from",
		Args:  exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			b := readBuildInfo()
			fmt.Fprintf(s.out, "version:  %s\ngo:       %s\nrevision: %s\n", b.Version, b.GoVersion, b.Revision)
			if b.Time != "" {
				fmt.Fprintf(s.out, "time:     %s\n", b.Time)
			}
			fmt.Fprintf(s.out, "modified: %v\n", b.Modified)
			return nil
		},
	}
}
