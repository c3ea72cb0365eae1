package testwait

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the
// test, so that the failure message itself can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestPoll(t *testing.T) {
	cases := []struct {
		desc     string
		readyAt  int32 // the call on which cond first holds; 0: never
		timeout  time.Duration
		wantFail []string // parts of the failure message; nil: no failure
	}{
		{desc: "holds at once", readyAt: 1, timeout: time.Second},
		{desc: "holds after a few polls", readyAt: 4, timeout: 10 * time.Second},
		{desc: "never holds", timeout: 50 * time.Millisecond,
			wantFail: []string{"timed out after 50ms waiting for the thing", "last: call "}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			var calls atomic.Int32
			r := &recorder{TB: t}
			Poll(r, c.timeout, "the thing", func() (bool, string) {
				n := calls.Add(1)
				return c.readyAt != 0 && n >= c.readyAt, fmt.Sprintf("call %d", n)
			})
			if c.wantFail == nil {
				if r.failed != "" {
					t.Fatalf("failed: %s", r.failed)
				}
				if got := calls.Load(); got != c.readyAt {
					t.Fatalf("cond called %d times, want %d", got, c.readyAt)
				}
				return
			}
			for _, part := range c.wantFail {
				if !strings.Contains(r.failed, part) {
					t.Fatalf("failure %q does not say %q", r.failed, part)
				}
			}
		})
	}
}

func TestEqual(t *testing.T) {
	type host struct{ Name, State string }
	var n atomic.Int32
	Equal(t, "h1 up on the third read", host{"h1", "up"}, func() host {
		if n.Add(1) < 3 {
			return host{"h1", "down"}
		}
		return host{"h1", "up"}
	})

	r := &recorder{TB: t}
	equalWithin(r, 30*time.Millisecond, "h1 up", host{"h1", "up"}, func() host { return host{"h1", "down"} })
	// cmp.Diff's layout is deliberately unstable; its lines name the field.
	for _, part := range []string{"waiting for h1 up", "(-want +got)", `State: "up"`, `State: "down"`} {
		if !strings.Contains(r.failed, part) {
			t.Fatalf("failure %q does not say %q", r.failed, part)
		}
	}
}

func TestWait(t *testing.T) {
	err := Wait(context.Background(), 30*time.Millisecond, func() (bool, string) { return false, "h1 down" })
	if err == nil || !strings.Contains(err.Error(), "h1 down") {
		t.Fatalf("Wait = %v, want an error naming the last state", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, time.Hour, func() (bool, string) { return false, "" }); err == nil {
		t.Fatal("Wait with an ended context returned nil")
	}
	if err := Wait(context.Background(), time.Hour, func() (bool, string) { return true, "" }); err != nil {
		t.Fatalf("Wait of a condition that holds: %v", err)
	}
}
