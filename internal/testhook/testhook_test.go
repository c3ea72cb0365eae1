package testhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
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
	testwait.Poll(t, 5*time.Second, "Pause to record its arrival", func() (bool, string) {
		b, _ := os.ReadFile(file)
		return string(b) == "here id-1\n", fmt.Sprintf("%s holds %q", file, b)
	})
	select {
	case <-released:
		t.Fatal("Pause returned before its context ended")
	default:
	}
	cancel()
	<-released
}
