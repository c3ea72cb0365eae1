// Package backoff holds the two waiting primitives every long-running piece
// of Berth uses when etcd or a peer is away: a sleep that ends with its
// context, and a doubling delay with a ceiling that starts over after a
// success. Before it, five packages each had a private copy of both.
package backoff

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, whichever is first. It reports whether
// the whole d passed (false: ctx ended first).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Backoff is a doubling delay: Next returns the current delay and doubles
// it, up to Max; Reset starts over at Min after a success. The zero value is
// not usable: build one with New. A Backoff belongs to one goroutine.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// New returns a Backoff that starts at min and doubles up to max.
func New(min, max time.Duration) *Backoff {
	if max < min {
		max = min
	}
	return &Backoff{Min: min, Max: max, cur: min}
}

// Default is the schedule Berth's watchers and registrations use: 100ms
// doubling to 5s, short enough to catch an etcd election's end, long enough
// not to hammer a cluster that is down.
func Default() *Backoff { return New(100*time.Millisecond, 5*time.Second) }

// Current is the delay the next Next or Wait will use, for logs.
func (b *Backoff) Current() time.Duration { return b.cur }

// Next returns the delay to wait now and doubles the following one.
func (b *Backoff) Next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.Max)
	return d
}

// Wait sleeps Next(), or until ctx ends; it reports whether the whole delay
// passed.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Reset starts the schedule over at Min.
func (b *Backoff) Reset() { b.cur = b.Min }
