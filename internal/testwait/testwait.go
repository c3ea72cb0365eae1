// Package testwait is the one way a Berth test waits for state that
// arrives on its own time (a watch delivering, an agent registering, a
// process answering): it polls a condition until it holds, and fails the
// test at a deadline with what was awaited and the last state seen. Tests
// never sleep a fixed time and hope.
//
//	testwait.Until(t, "agent h1 up", func() bool { return up("h1") })
//	testwait.Equal(t, "h1's traits", []string{"CUSTOM_X"}, func() []string { return traits("h1") })
//	testwait.Poll(t, time.Minute, "the API to answer", func() (bool, string) { ... })
package testwait

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-project/berth/internal/backoff"
)

// Timeout is how long Until and Equal wait: far above what any awaited
// state takes on a loaded machine, so that only a real failure reaches it.
const Timeout = 15 * time.Second

// The polls start short, since most awaited states arrive within
// milliseconds, and double to a ceiling, so that a slow state (an etcd
// election, a process starting) is not polled hard on a shared machine.
const (
	firstInterval = 10 * time.Millisecond
	maxInterval   = 250 * time.Millisecond
)

// Poll calls cond until it reports done, failing t when timeout passes
// first with "timed out after <timeout> waiting for <what>; last: <state>",
// state being cond's description of what it saw on its last call. cond may
// itself fail t (a process it watches exited).
func Poll(t testing.TB, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	if err := poll(context.Background(), timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s; %v", timeout, what, err)
	}
}

// Until is Poll for Timeout, of a condition with no state to describe.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Poll(t, Timeout, what, func() (bool, string) { return cond(), "not yet" })
}

// Equal polls get until its value equals want (cmp.Equal with opts) or
// Timeout passes, then fails t with cmp.Diff of want and the last value.
func Equal[T any](t testing.TB, what string, want T, get func() T, opts ...cmp.Option) {
	t.Helper()
	equalWithin(t, Timeout, what, want, get, opts...)
}

func equalWithin[T any](t testing.TB, timeout time.Duration, what string, want T, get func() T, opts ...cmp.Option) {
	t.Helper()
	Poll(t, timeout, what, func() (bool, string) {
		if diff := cmp.Diff(want, get(), opts...); diff != "" {
			return false, "(-want +got):\n" + diff
		}
		return true, ""
	})
}

// Wait is Poll for code that reports instead of failing a test: it
// returns an error naming the last state when ctx ends or timeout passes
// before cond reports done.
func Wait(ctx context.Context, timeout time.Duration, cond func() (done bool, state string)) error {
	return poll(ctx, timeout, cond)
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b := backoff.New(firstInterval, maxInterval)
	for {
		done, state := cond()
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("last: %s", state)
		}
		b.Wait(ctx)
	}
}
