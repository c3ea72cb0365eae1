package configs

import (
	"testing"
	"time"
)

// The api block's move options: resize_confirm_window is off unless set,
// and a negative window is refused where it is written.
func TestParseResizeConfirmWindow(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      time.Duration
	}{
		{"default off", "api {}\n", 0},
		{"explicitly off", "api {\n  resize_confirm_window = \"0s\"\n}\n", 0},
		{"an hour", "api {\n  resize_confirm_window = \"1h\"\n}\n", time.Hour},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.API.ResizeConfirmWindow; got != tc.want {
				t.Errorf("resize_confirm_window = %s, want %s", got, tc.want)
			}
		})
	}
	checkRefused(t, []refused{
		{"negative window", "api {\n  resize_confirm_window = \"-1s\"\n}\n",
			diag{"2:27", "Invalid resize_confirm_window", "at least 0s"}},
		{"window not a duration", "api {\n  resize_confirm_window = \"60\"\n}\n",
			diag{"2:27", "Invalid duration", "not a duration"}},
	})
}
