package fdlimit

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestRaise(t *testing.T) {
	errDenied := errors.New("operation not permitted")
	for _, tc := range []struct {
		desc       string
		soft, hard uint64
		getErr     error
		setErr     error
		want       uint64
		wantSet    bool
		wantLog    string
	}{
		{desc: "raised by the Go runtime already", soft: 19999, hard: 20000, want: 19999,
			wantLog: "[INFO]  open file limit: soft=19999 hard=20000"},
		{desc: "at the hard limit", soft: 20000, hard: 20000, want: 20000,
			wantLog: "[INFO]  open file limit: soft=20000 hard=20000"},
		{desc: "low soft limit", soft: 1024, hard: 65536, want: 65536, wantSet: true,
			wantLog: "[INFO]  open file limit raised to its hard limit: before=1024 after=65536"},
		{desc: "raise refused", soft: 1024, hard: 65536, setErr: errDenied, want: 1024, wantSet: true,
			wantLog: "[WARN]  cannot raise the open file limit to its hard limit: soft=1024 hard=65536 error=\"operation not permitted\""},
		{desc: "unreadable", getErr: errDenied, want: 0,
			wantLog: "[WARN]  cannot read the open file limit: error=\"operation not permitted\""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out strings.Builder
			log := hclog.New(&hclog.LoggerOptions{Output: &out, DisableTime: true})
			var set bool
			got := raise(log, limits{
				get: func() (uint64, uint64, error) { return tc.soft, tc.hard, tc.getErr },
				set: func(soft, hard uint64) error {
					set = true
					if soft != tc.hard || hard != tc.hard {
						t.Errorf("set(%d, %d), want the hard limit %d for both", soft, hard, tc.hard)
					}
					return tc.setErr
				},
			})
			if got != tc.want || set != tc.wantSet {
				t.Errorf("raise = %d (set called: %v), want %d (%v)", got, set, tc.want, tc.wantSet)
			}
			if line := strings.TrimSpace(out.String()); line != tc.wantLog {
				t.Errorf("log = %q\nwant  %q", line, tc.wantLog)
			}
		})
	}
}

// TestRaiseThisProcess: on this system the limit can be read, and the
// soft limit Raise reports is the one in force.
func TestRaiseThisProcess(t *testing.T) {
	if osLimits.get == nil {
		t.Skip("no open file limit managed here")
	}
	got := Raise(hclog.NewNullLogger())
	soft, _, err := osLimits.get()
	if err != nil || got != soft || got == 0 {
		t.Errorf("Raise = %d; the limit in force is %d (%v)", got, soft, err)
	}
}
