package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// TestFakeDriverLiveFailureInjection: each live operation fails only
// when its own flag is set (FailLiveCheck, or Fail as a build's), with a
// reschedulable BuildError naming the host and the operation, and a
// guest moves only when its operation succeeds.
func TestFakeDriverLiveFailureInjection(t *testing.T) {
	ctx := context.Background()
	b := &etcdschema.Build{InstanceUUID: "i1"}
	cases := []struct {
		desc                string
		cfg                 FakeConfig
		check, start, out   string // "" succeeds, else the reason's words
		runsAfterIn, outRun bool   // dest runs after LiveMigrateIn; source still runs after LiveMigrateOut
	}{
		{desc: "nothing fails", runsAfterIn: true},
		{desc: "the pre-check", cfg: FakeConfig{FailLiveCheck: true}, check: "failed the live migration pre-check",
			runsAfterIn: true},
		{desc: "every operation of a failing host fails its pre-check", cfg: FakeConfig{Fail: true},
			check: "failed the live migration pre-check", runsAfterIn: true},
		{desc: "the start", cfg: FakeConfig{FailLiveStart: true}, start: "failed the live migration"},
		{desc: "the hand-over", cfg: FakeConfig{FailLiveOut: true}, out: "failed the live migration hand-over",
			runsAfterIn: true, outRun: true},
	}
	expect := func(t *testing.T, what string, err error, words string) {
		t.Helper()
		if words == "" {
			if err != nil {
				t.Errorf("%s failed: %v", what, err)
			}
			return
		}
		var be *BuildError
		if !errors.As(err, &be) || !be.Reschedulable || !strings.Contains(be.Reason, words) || !strings.Contains(be.Reason, "h1") {
			t.Errorf("%s: %v, want a reschedulable BuildError on h1 saying %q", what, err, words)
		}
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			dest, src := NewFakeDriver("h1", c.cfg), NewFakeDriver("h1", c.cfg)
			if err := src.Resume(ctx, b); err != nil { // running on the source, whatever Fail says
				t.Fatal(err)
			}
			expect(t, "check", dest.CheckLiveMigration(ctx, b), c.check)
			expect(t, "start", dest.LiveMigrateIn(ctx, b, nil), c.start)
			if got, _ := dest.List(ctx); slices.Contains(got, "i1") != c.runsAfterIn {
				t.Errorf("destination runs %v after the start, want i1 running %v", got, c.runsAfterIn)
			}
			expect(t, "hand-over", src.LiveMigrateOut(ctx, "i1"), c.out)
			if got, _ := src.List(ctx); slices.Contains(got, "i1") != c.outRun {
				t.Errorf("source runs %v after the hand-over, want i1 running %v", got, c.outRun)
			}
		})
	}
}

// TestProcessDriverLiveMigrates: the guest's process starts on the
// destination while the source's still runs (both alive at once), then
// the source's stops; a guest without a command fails the pre-check.
func TestProcessDriverLiveMigrates(t *testing.T) {
	ctx := context.Background()
	src, _ := newProcDriver(t, t.TempDir())
	dest, _ := newProcDriver(t, t.TempDir())
	b := procBuild("live1", "sleep 60")
	if err := src.Spawn(ctx, b); err != nil {
		t.Fatal(err)
	}
	srcPID := pidOf(t, src, "live1")
	if err := dest.CheckLiveMigration(ctx, b); err != nil {
		t.Fatalf("pre-check: %v", err)
	}
	if err := dest.LiveMigrateIn(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	destPID := pidOf(t, dest, "live1")
	if gone(srcPID) || gone(destPID) || srcPID == destPID {
		t.Fatalf("after the start: source %d gone %v, destination %d gone %v; want both running", srcPID, gone(srcPID),
			destPID, gone(destPID))
	}
	if err := src.LiveMigrateOut(ctx, "live1"); err != nil {
		t.Fatal(err)
	}
	if !gone(srcPID) || gone(destPID) {
		t.Errorf("after the hand-over: source gone %v, destination gone %v", gone(srcPID), gone(destPID))
	}
	if got, _ := src.List(ctx); len(got) != 0 {
		t.Errorf("the source still lists %v", got)
	}
	var be *BuildError
	if err := dest.CheckLiveMigration(ctx, procBuild("live2", "")); !errors.As(err, &be) || !be.Reschedulable {
		t.Errorf("pre-check of a guest without a command: %v, want a reschedulable BuildError", err)
	}
}

// TestFakeDriverForceComplete: a live start that would take a minute
// ends at once when forced.
func TestFakeDriverForceComplete(t *testing.T) {
	d := NewFakeDriver("h1", FakeConfig{LiveMigrationTime: time.Minute})
	force := make(chan struct{})
	close(force)
	start := time.Now()
	if err := d.LiveMigrateIn(context.Background(), &etcdschema.Build{InstanceUUID: "i1"}, force); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a forced start took %s", took)
	}
	if got, _ := d.List(context.Background()); !slices.Contains(got, "i1") {
		t.Errorf("the forced guest is not running: %v", got)
	}
}
