package backoff

import (
	"context"
	"testing"
	"time"
)

func TestBackoffDoublesToMaxAndResets(t *testing.T) {
	b := New(100*time.Millisecond, 500*time.Millisecond)
	want := []time.Duration{100, 200, 400, 500, 500}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("Next #%d = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Fatalf("after Reset, Next = %v, want 100ms", got)
	}
}

func TestNewClampsMaxBelowMin(t *testing.T) {
	b := New(time.Second, time.Millisecond)
	b.Next()
	if got := b.Next(); got != time.Second {
		t.Fatalf("Next = %v, want the 1s floor", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on a cancelled context reported the whole hour passed")
	}
	if !Sleep(context.Background(), time.Microsecond) {
		t.Fatal("Sleep of 1µs on a live context reported false")
	}
	if Sleep(ctx, 0) {
		t.Fatal("Sleep(0) on a cancelled context reported true")
	}
}
