package configs

import "testing"

// TestParsePlacementWorkLimit: candidate_work_limit is decoded over its
// default, and a limit too small for ordinary nested searches is refused
// where it is written.
func TestParsePlacementWorkLimit(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      int64
	}{
		{"default", "placement {}\n", Defaults().Placement.CandidateWorkLimit},
		{"set", "placement {\n  candidate_work_limit = 50000\n}\n", 50000},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Placement.CandidateWorkLimit; got != tc.want {
				t.Errorf("CandidateWorkLimit = %d, want %d", got, tc.want)
			}
		})
	}
	if Defaults().Placement.CandidateWorkLimit != 200_000 {
		t.Errorf("the default must stay placement.DefaultCandidateWorkLimit (200000)")
	}
	checkRefused(t, []refused{
		{"too small", "placement {\n  candidate_work_limit = 10\n}\n",
			diag{"2:26", "Invalid candidate_work_limit", "at least 1000 (a search over a few nested trees tries thousands of combinations); got 10"}},
	})
}
