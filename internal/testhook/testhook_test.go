package testhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPauseOnlyAtTheNamedPoint(t *testing.T) {
	file := filepath.Join(t.TempDir(), "paused")
	t.Setenv(EnvPoint, "here")
	t.Setenv(EnvFile, file)

	done := make(chan struct{})
	go func() { Pause(context.Background(), "elsewhere", "x"); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Pause blocked at a point the environment did not name")
	}

	ctx, cancel := context.WithCancel(context.Background())
	released := make(chan struct{})
	go func() { Pause(ctx, "here", "id-1"); close(released) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, _ := os.ReadFile(file); string(b) == "here id-1\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Pause did not record its arrival")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
	}
	select {
	case <-released:
		t.Fatal("Pause returned before its context ended")
	default:
	}
	cancel()
	<-released
}
