package configs

import (
	"testing"

	"github.com/berth-project/berth/internal/gctune"
)

func TestParseRuntime(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      gctune.Policy
	}{
		{desc: "no block: the defaults", src: "", want: gctune.Default()},
		{desc: "empty block: the defaults", src: "runtime {}\n", want: gctune.Default()},
		{desc: "percent only", src: "runtime {\n  gc_percent = 200\n}\n", want: gctune.Policy{GCPercent: 200}},
		{desc: "both", src: "runtime {\n  gc_percent = 800\n  memory_limit = \"2GiB\"\n}\n",
			want: gctune.Policy{GCPercent: 800, MemoryLimit: 2 << 30}},
		{desc: "limit off", src: "runtime {\n  memory_limit = \"off\"\n}\n",
			want: gctune.Policy{GCPercent: gctune.DefaultGCPercent}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Runtime != tc.want {
				t.Errorf("Runtime = %+v, want %+v", cfg.Runtime, tc.want)
			}
		})
	}
}

func TestParseRuntimeRefused(t *testing.T) {
	checkRefused(t, []refused{
		{desc: "percent too low", src: "runtime {\n  gc_percent = 5\n}\n",
			want: diag{"2:16", "Invalid gc_percent", "gc_percent must be at least 10"}},
		{desc: "percent too high", src: "runtime {\n  gc_percent = 2000000\n}\n",
			want: diag{"2:16", "Invalid gc_percent", "at most 1000000"}},
		{desc: "limit without unit", src: "runtime {\n  memory_limit = \"2048\"\n}\n",
			want: diag{"2:18", "Invalid memory_limit", `"2048" is not a size like "2GiB"`}},
		{desc: "limit in decimal units", src: "runtime {\n  memory_limit = \"2GB\"\n}\n",
			want: diag{"2:18", "Invalid memory_limit", "KiB, MiB, GiB"}},
		{desc: "limit as a number", src: "runtime {\n  memory_limit = 2\n}\n",
			want: diag{"2:18", "Invalid memory_limit", `"2" is not a size`}},
	})
}
