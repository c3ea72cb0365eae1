package configs

import (
	"testing"
	"time"
)

// The queues' holder ranking (rank_grace, holder_idle_after) in the
// superconductor's and the cell conductor's blocks: defaults, values
// read, and every bad value refused at the value with the reason.
func TestParseRankingOptions(t *testing.T) {
	cfg, err := Parse([]byte("superconductor {}\nconductor {\n  cell = \"c1\"\n}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := Ranking{Grace: 250 * time.Millisecond, IdleAfter: time.Second, StealAfter: 2 * time.Second}
	if cfg.Superconductor.Ranking != want || cfg.Conductor.Ranking != want {
		t.Errorf("defaults: superconductor %+v, conductor %+v; want %+v", cfg.Superconductor.Ranking, cfg.Conductor.Ranking, want)
	}
	if d := Defaults(); d.Superconductor.Ranking != want || d.Conductor.Ranking != want {
		t.Errorf("Defaults(): superconductor %+v, conductor %+v; want %+v", d.Superconductor.Ranking, d.Conductor.Ranking, want)
	}

	for _, tc := range []struct {
		desc, src string
		sup, cond Ranking
	}{
		{"all set in both blocks",
			"superconductor {\n  rank_grace = \"100ms\"\n  holder_idle_after = \"3s\"\n  steal_after = \"5s\"\n}\nconductor {\n  cell = \"c1\"\n  rank_grace = \"2s\"\n  holder_idle_after = \"2s\"\n  steal_after = \"2s\"\n}\n",
			Ranking{100 * time.Millisecond, 3 * time.Second, 5 * time.Second}, Ranking{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"grace only, within the default window",
			"superconductor {\n  rank_grace = \"500ms\"\n}\nconductor {\n  cell = \"c1\"\n}\n",
			Ranking{500 * time.Millisecond, time.Second, 2 * time.Second}, want},
		{"window only, within the default steal",
			"superconductor {}\nconductor {\n  cell = \"c1\"\n  holder_idle_after = \"1500ms\"\n}\n",
			want, Ranking{250 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second}},
		{"stealing off, any window",
			"superconductor {\n  holder_idle_after = \"10s\"\n  steal_after = \"0s\"\n}\nconductor {\n  cell = \"c1\"\n}\n",
			Ranking{250 * time.Millisecond, 10 * time.Second, 0}, want},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Superconductor.Ranking != tc.sup || cfg.Conductor.Ranking != tc.cond {
				t.Errorf("superconductor %+v, conductor %+v; want %+v, %+v", cfg.Superconductor.Ranking, cfg.Conductor.Ranking, tc.sup, tc.cond)
			}
		})
	}

	checkRefused(t, []refused{
		{"zero grace", "superconductor {\n  rank_grace = \"0s\"\n}\n",
			diag{"2:16", "Invalid rank_grace", "at least 1ms (at 0 every holder races for every item)"}},
		{"negative window", "conductor {\n  cell = \"c1\"\n  holder_idle_after = \"-1s\"\n}\n",
			diag{"3:23", "Invalid holder_idle_after", "at least 1ms"}},
		{"grace not a duration", "conductor {\n  cell = \"c1\"\n  rank_grace = \"quick\"\n}\n",
			diag{"3:16", "Invalid duration", "not a duration"}},
		{"window shorter than the grace", "superconductor {\n  rank_grace = \"1s\"\n  holder_idle_after = \"500ms\"\n}\n",
			diag{"3:23", "Invalid holder_idle_after", "holder_idle_after (500ms) must be at least rank_grace (1s)"}},
		// Only the grace written: it is the value to fix, not the default
		// window the file does not show.
		{"grace above the default window", "conductor {\n  cell = \"c1\"\n  rank_grace = \"2s\"\n}\n",
			diag{"3:16", "Invalid rank_grace", "holder_idle_after (1s) must be at least rank_grace (2s)"}},
		{"negative steal", "superconductor {\n  steal_after = \"-2s\"\n}\n",
			diag{"2:17", "Invalid steal_after", "at least 0s (0 turns stealing off)"}},
		{"steal sooner than the window", "superconductor {\n  holder_idle_after = \"3s\"\n  steal_after = \"2s\"\n}\n",
			diag{"3:17", "Invalid steal_after", "steal_after (2s) must be 0 (never) or at least holder_idle_after (3s)"}},
		{"window above the default steal", "conductor {\n  cell = \"c1\"\n  holder_idle_after = \"5s\"\n}\n",
			diag{"3:23", "Invalid holder_idle_after", "steal_after (2s) must be 0 (never) or at least holder_idle_after (5s)"}},
	})
}
