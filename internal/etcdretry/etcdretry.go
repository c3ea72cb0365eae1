// Package etcdretry tells the errors etcd gives while it cannot commit for
// now (no leader, a leader change, a proposal that timed out, a member
// that went away mid-request) from those no retry can help, and retries a
// request through the former for a bounded time.
//
// Such an error says nothing of whether a write was applied: etcd may
// have committed it and lost only the answer. So only a request that is
// safe to send twice may be retried; a write is made so by a compare that
// fails once it has landed (see api's build request transaction).
package etcdretry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-project/berth/internal/backoff"
)

// Transient reports whether err is one that the same request may not get
// a moment later: etcd answers codes.Unavailable while a cluster elects a
// leader, when a proposal times out (7 s with etcd's default election
// timeout) or a member stops, and "too many requests" while its apply
// lags; the client reports Unavailable when a member's connection breaks.
// A full database, a bad request, a compacted revision or a context that
// ended are not transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || errors.Is(ee, rpctypes.ErrTooManyRequests)
	}
	return status.Code(err) == codes.Unavailable
}

// Backoff between attempts: etcd elects a leader within one or two
// election timeouts (1 s by default), so waits grow to about that.
const (
	firstWait = 50 * time.Millisecond
	maxWait   = time.Second
)

// Do calls op until it returns nil or an error that is not Transient, or
// until ctx ends, or until patience has passed since the first call
// (counted when an attempt ends: one already sent is not cut short).
// Before each retry it calls onRetry, if not nil, with the number of the
// attempt that failed and its error (for a log line). It returns op's
// last error, wrapped with the attempt count when it gave up on a
// transient one.
func Do(ctx context.Context, patience time.Duration, op func(context.Context) error, onRetry func(attempt int, err error)) error {
	start := time.Now()
	wait := backoff.New(firstWait, maxWait)
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if !Transient(err) {
			return err
		}
		if ctx.Err() != nil || time.Since(start)+wait.Current() > patience {
			return fmt.Errorf("etcd could not commit in %d attempt(s) over %s: %w",
				attempt, time.Since(start).Round(time.Millisecond), err)
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		if !wait.Wait(ctx) {
			return fmt.Errorf("etcd could not commit in %d attempt(s) before the request ended: %w", attempt, err)
		}
	}
}

// Unavailable reports whether err means the store did not answer in time:
// a Transient error, or the request's context ending (the HTTP server's
// per-request deadline, or the client gone) before etcd answered, as the
// client returns it or as a gRPC status. An API answers it with 503 in its
// own error shape, never 500: while the cluster has no quorum, a request
// that needs it ends this way at its deadline.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if Transient(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}
