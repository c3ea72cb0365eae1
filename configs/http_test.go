package configs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseHTTP: the http block's values are decoded over the defaults,
// and a file without the block gets the defaults.
func TestParseHTTP(t *testing.T) {
	def := Defaults().HTTP
	for _, tc := range []struct {
		desc, src string
		want      HTTP
	}{
		{desc: "no block", src: "", want: def},
		{desc: "empty block", src: "http {}\n", want: def},
		{
			desc: "every option",
			src: `http {
  read_header_timeout = "2s"
  read_timeout        = "20s"
  write_timeout       = "30s"
  idle_timeout        = "5s"
  request_timeout     = "12s"
  max_header_bytes    = 8192
  max_body_bytes      = 1048576
  max_connections     = 64
}
`,
			want: HTTP{ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 20 * time.Second, WriteTimeout: 30 * time.Second,
				IdleTimeout: 5 * time.Second, RequestTimeout: 12 * time.Second, MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20, MaxConnections: 64},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, cfg.HTTP); d != "" {
				t.Errorf("HTTP (-want +got):\n%s", d)
			}
		})
	}
}

// TestParseHTTPRefuses: a limit that would serve no one, cut off
// legitimate requests or contradict another is refused where it is written.
func TestParseHTTPRefuses(t *testing.T) {
	checkRefused(t, []refused{
		{"no connections", "http {\n  max_connections = 0\n}\n",
			diag{"2:21", "Invalid max_connections", "at least 1 (the listener would serve no one)"}},
		{"tiny head", "http {\n  max_header_bytes = 100\n}\n",
			diag{"2:22", "Invalid max_header_bytes", "at least 4096"}},
		{"tiny body", "http {\n  max_body_bytes = 1000\n}\n",
			diag{"2:20", "Invalid max_body_bytes", "at least 65536"}},
		{"no header timeout", "http {\n  read_header_timeout = \"0s\"\n}\n",
			diag{"2:25", "Invalid read_header_timeout", "at least 100ms"}},
		{"read timeout shorter than a service update's wait", "http {\n  read_timeout = \"5s\"\n}\n",
			diag{"2:18", "Invalid read_timeout", "at least 15s"}},
		{"not a duration", "http {\n  idle_timeout = \"forever\"\n}\n",
			diag{"2:18", "Invalid duration", `idle_timeout = "forever" is not a duration`}},
		{"head slower than the request", "http {\n  read_header_timeout = \"2m\"\n}\n",
			diag{"2:25", "Invalid read_header_timeout", "must be at most read_timeout (1m0s)"}},
		{"request shorter than the default head timeout", "http {\n  read_timeout = \"15s\"\n  read_header_timeout = \"20s\"\n}\n",
			diag{"3:25", "Invalid read_header_timeout", "must be at most read_timeout (15s)"}},
		{"write before read ends", "http {\n  write_timeout = \"30s\"\n}\n",
			diag{"2:19", "Invalid write_timeout", "must be at least read_timeout (1m0s)"}},
		{"request deadline too short for a service update", "http {\n  request_timeout = \"5s\"\n}\n",
			diag{"2:21", "Invalid request_timeout", "at least 12s"}},
		{"request deadline past the read timeout", "http {\n  request_timeout = \"30s\"\n  read_timeout = \"20s\"\n}\n",
			diag{"2:21", "Invalid request_timeout", "must be at most read_timeout (20s)"}},
		{"read timeout below the default request deadline", "http {\n  read_timeout = \"15s\"\n  request_timeout = \"20s\"\n}\n",
			diag{"3:21", "Invalid request_timeout", "must be at most read_timeout (15s)"}},
		{"read past the default write", "http {\n  read_timeout = \"2m\"\n}\n",
			diag{"2:18", "Invalid read_timeout", "write_timeout (1m30s) must be at least read_timeout (2m0s)"}},
	})
}
