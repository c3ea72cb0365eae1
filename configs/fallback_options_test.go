package configs

import (
	"strings"
	"testing"
)

// The scheduler's empty_placement_fallback is off unless set, and only a
// boolean is accepted.
func TestParseEmptyPlacementFallback(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      bool
	}{
		{"default off", "scheduler {}\n", false},
		{"on", "scheduler {\n  empty_placement_fallback = true\n}\n", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Scheduler.EmptyPlacementFallback; got != tc.want {
				t.Errorf("empty_placement_fallback = %v, want %v", got, tc.want)
			}
		})
	}
	_, err := Parse([]byte("scheduler {\n  empty_placement_fallback = \"sometimes\"\n}\n"), "t.hcl")
	if err == nil || !strings.Contains(err.Error(), "t.hcl:2:") {
		t.Fatalf("a non-boolean fallback: %v, want an error at its line", err)
	}
}
