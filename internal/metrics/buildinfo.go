package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is Berth's version, set at link time
// (-ldflags "-X github.com/berth-project/berth/internal/metrics.Version=v1.2.3");
// without it, the module version Go recorded ("(devel)" in a checkout).
var Version = ""

// BuildInfo is what berth_build_info says of this binary: its version,
// the VCS revision it was built from (with "-dirty" when the tree had
// changes; "unknown" when Go recorded none, as in `go test`) and the Go
// version that built it.
func BuildInfo() (version, revision, goVersion string) {
	version, revision = Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && revision != "unknown" {
			revision += "-dirty"
		}
	}
	if version == "" {
		version = "(devel)"
	}
	return version, revision, runtime.Version()
}

// newBuildInfo is berth_build_info: 1, labelled with BuildInfo.
func newBuildInfo() prometheus.Collector {
	v, r, g := BuildInfo()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "berth_build_info",
		Help:        "Always 1; its labels say which Berth this process runs: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": v, "revision": r, "go_version": g},
	})
	gauge.Set(1)
	return gauge
}
