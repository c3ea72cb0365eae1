package etcdretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"request timed out", rpctypes.ErrTimeout, true},
		{"timed out, leader failed", rpctypes.ErrTimeoutDueToLeaderFail, true},
		{"timed out, connection lost", rpctypes.ErrTimeoutDueToConnectionLost, true},
		{"applied index wait", rpctypes.ErrTimeoutWaitAppliedIndex, true},
		{"no leader", rpctypes.ErrNoLeader, true},
		{"leader changed", rpctypes.ErrLeaderChanged, true},
		{"member stopped", rpctypes.ErrStopped, true},
		{"too many requests", rpctypes.ErrTooManyRequests, true},
		{"wrapped", fmt.Errorf("store build requests: %w", rpctypes.ErrLeaderChanged), true},
		// What the in-process client and a raw stream return: gRPC statuses.
		{"grpc status of a timeout", rpctypes.ErrGRPCTimeout, true},
		{"connection broke", status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"database full", rpctypes.ErrNoSpace, false},
		{"compacted", rpctypes.ErrCompacted, false},
		{"request too large", rpctypes.ErrRequestTooLarge, false},
		{"permission denied", rpctypes.ErrPermissionDenied, false},
		{"context canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("put: %w", context.DeadlineExceeded), false},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{"other", errors.New("boom"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestDoRetriesTransientUntilSuccess(t *testing.T) {
	calls := 0
	var retried []int
	err := Do(context.Background(), 10*time.Second, func(context.Context) error {
		calls++
		if calls < 3 {
			return rpctypes.ErrLeaderChanged
		}
		return nil
	}, func(attempt int, err error) {
		if !errors.Is(err, rpctypes.ErrLeaderChanged) {
			t.Errorf("onRetry got %v", err)
		}
		retried = append(retried, attempt)
	})
	if err != nil || calls != 3 || fmt.Sprint(retried) != "[1 2]" {
		t.Fatalf("err %v, calls %d, retried %v; want nil, 3, [1 2]", err, calls, retried)
	}
}

func TestDoReturnsOtherErrorsAtOnce(t *testing.T) {
	calls := 0
	err := Do(context.Background(), 10*time.Second, func(context.Context) error {
		calls++
		return rpctypes.ErrNoSpace
	}, nil)
	if !errors.Is(err, rpctypes.ErrNoSpace) || calls != 1 {
		t.Fatalf("err %v after %d calls; want the database-full error after 1", err, calls)
	}
}

func TestDoGivesUpAfterPatience(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Do(context.Background(), 300*time.Millisecond, func(context.Context) error {
		calls++
		return rpctypes.ErrTimeout
	}, nil)
	if !errors.Is(err, rpctypes.ErrTimeout) || calls < 2 {
		t.Fatalf("err %v after %d calls; want the timeout, after more than one call", err, calls)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s with a patience of 300ms", el)
	}
}

func TestDoStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Do(ctx, time.Minute, func(context.Context) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return rpctypes.ErrNoLeader
	}, nil)
	if !errors.Is(err, rpctypes.ErrNoLeader) || calls != 2 {
		t.Fatalf("err %v after %d calls; want the no-leader error after 2", err, calls)
	}
}

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"no leader", rpctypes.ErrNoLeader, true},
		{"request deadline", fmt.Errorf("read etcd revision: %w", context.DeadlineExceeded), true},
		{"client gone", context.Canceled, true},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"gave up retrying", fmt.Errorf("etcd could not commit in 3 attempt(s) over 15s: %w", rpctypes.ErrTimeout), true},
		{"database full", rpctypes.ErrNoSpace, false},
		{"other", errors.New("boom"), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
