package scheduler

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRequestLogWritesWhatWithWrites: the lazy request logger writes the
// same lines as the scheduler's logger With the request's id, at every
// level and through a derived logger, and keeps the level.
func TestRequestLogWritesWhatWithWrites(t *testing.T) {
	newLog := func(buf *bytes.Buffer) hclog.Logger {
		return hclog.New(&hclog.LoggerOptions{Name: "scheduler", Output: buf, Level: hclog.Debug, DisableTime: true})
	}
	var want, got bytes.Buffer
	eager := newLog(&want).With("request_id", "req-1")
	lazy := hclog.Logger(&requestLog{Logger: newLog(&got), id: "req-1"})
	for _, l := range []hclog.Logger{eager, lazy} {
		l.Trace("not written", "k", 0)
		l.Debug("weighed hosts", "instance", "i-1", "weighed", 3)
		l.Info("info", "k", 1)
		l.Warn("host view behind the request", "revision", 7)
		l.Error("error", "k", 2)
		l.Log(hclog.Info, "log", "k", 3)
		l.With("instance", "i-2").Info("derived")
		l.Named("claim").Debug("named")
	}
	if got.String() != want.String() {
		t.Fatalf("lazy request logger wrote\n%s\nwant\n%s", got.String(), want.String())
	}
	if want.Len() == 0 {
		t.Fatal("nothing written")
	}
	if lazy.IsTrace() != eager.IsTrace() || lazy.IsDebug() != eager.IsDebug() || lazy.GetLevel() != eager.GetLevel() {
		t.Fatalf("levels differ: lazy trace %v debug %v %v, eager trace %v debug %v %v",
			lazy.IsTrace(), lazy.IsDebug(), lazy.GetLevel(), eager.IsTrace(), eager.IsDebug(), eager.GetLevel())
	}
	if len(lazy.ImpliedArgs()) != 2 || lazy.ImpliedArgs()[1] != "req-1" {
		t.Fatalf("implied args %v, want request_id req-1", lazy.ImpliedArgs())
	}
}

// TestRequestLogAllocatesNothingUnwritten: a request that logs nothing
// at the logger's level pays no allocation for its logger (With pays
// three with a plain hclog logger).
func TestRequestLogAllocatesNothingUnwritten(t *testing.T) {
	base := hclog.New(&hclog.LoggerOptions{Name: "scheduler", Output: &bytes.Buffer{}, Level: hclog.Info})
	c := &Cycle{}
	id := "req-1"
	eager := testing.AllocsPerRun(100, func() {
		l := base.With("request_id", id)
		if l.IsDebug() {
			l.Debug("never")
		}
	})
	lazy := testing.AllocsPerRun(100, func() {
		c.log = requestLog{Logger: base, id: id}
		l := hclog.Logger(&c.log)
		if l.IsDebug() {
			l.Debug("never")
		}
		l.Debug("below the level, unguarded") // the level is checked before the With
	})
	if lazy != 0 {
		t.Fatalf("the request logger allocated %v times per request, With %v", lazy, eager)
	}
	t.Logf("allocations per request: With %v, requestLog %v", eager, lazy)
}
