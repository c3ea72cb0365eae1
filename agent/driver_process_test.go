package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

func procBuild(uuid, command string) *etcdschema.Build {
	f := etcdschema.Flavor{Name: "proc"}
	if command != "" {
		f.ExtraSpecs = map[string]string{CommandExtraSpec: command}
	}
	return &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Name: "n-" + uuid, Flavor: f}
}

func newProcDriver(t *testing.T, dir string) (*ProcessDriver, chan string) {
	t.Helper()
	return newProcDriverSettle(t, dir, 0)
}

// newProcDriverSettle sets how long Spawn watches a new process (0: the
// default).
func newProcDriverSettle(t *testing.T, dir string, settle time.Duration) (*ProcessDriver, chan string) {
	t.Helper()
	d, err := NewProcessDriver("h1", ProcessConfig{StateDir: dir, StopGrace: 300 * time.Millisecond, Settle: settle})
	if err != nil {
		t.Fatal(err)
	}
	exits := make(chan string, 10)
	d.NotifyExit(func(uuid, reason string) { exits <- uuid + ": " + reason })
	t.Cleanup(func() {
		ids, _ := d.List(context.Background())
		for _, id := range ids {
			_ = d.Destroy(context.Background(), id)
		}
	})
	return d, exits
}

func pidOf(t *testing.T, d *ProcessDriver, uuid string) int {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.run[uuid]
	if !ok {
		t.Fatalf("%s not running", uuid)
	}
	return e.state.PID
}

func gone(pid int) bool { return !sameProcess(pid, 0) }

// groupAlive says whether any process of group pgid runs (zombies waiting
// for init to reap them do not count).
func groupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fl := strings.Fields(s[i+1:])
		// fields after ')': state, ppid, pgrp
		if len(fl) > 2 && fl[0] != "Z" && fl[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func TestProcessDriverSpawnAndDestroy(t *testing.T) {
	cases := []struct {
		desc    string
		command string
	}{
		{"exits on SIGTERM", "sleep 30"},
		{"ignores SIGTERM, killed after the grace", `trap "" TERM; sleep 30 & wait; sleep 30`},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			d, exits := newProcDriver(t, dir)
			ctx := context.Background()
			if err := d.Spawn(ctx, procBuild("i1", tc.command)); err != nil {
				t.Fatal(err)
			}
			if err := d.Spawn(ctx, procBuild("i1", tc.command)); err != nil {
				t.Fatalf("second spawn of a running instance: %v", err)
			}
			if ids, _ := d.List(ctx); len(ids) != 1 || ids[0] != "i1" {
				t.Fatalf("List = %v", ids)
			}
			pid := pidOf(t, d, "i1")
			if _, err := os.Stat(filepath.Join(dir, "h1", "i1.json")); err != nil {
				t.Fatalf("no state record: %v", err)
			}
			if err := d.Destroy(ctx, "i1"); err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, fmt.Sprintf("process group %d gone after Destroy", pid), func() bool { return !groupAlive(pid) })
			if ids, _ := d.List(ctx); len(ids) != 0 {
				t.Fatalf("List after Destroy = %v", ids)
			}
			if _, err := os.Stat(filepath.Join(dir, "h1", "i1.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("state record left: %v", err)
			}
			select {
			case e := <-exits:
				t.Fatalf("a Destroy was reported as an unexpected exit: %s", e)
			default:
			}
			if err := d.Destroy(ctx, "i1"); err != nil {
				t.Fatalf("destroying an unknown instance: %v", err)
			}
		})
	}
}

func TestProcessDriverFailures(t *testing.T) {
	cases := []struct {
		desc          string
		command       string
		spawnErr      string // "" if Spawn succeeds
		reschedulable bool
		exit          string // reported later, when the process dies on its own
		killIt        bool
		settle        time.Duration
	}{
		{desc: "no command anywhere", spawnErr: "has no berth:command extra spec"},
		// A long settle: a loaded machine may take a while to run sh at all.
		{desc: "exits at once", command: "exit 7", spawnErr: "exited with status 7", reschedulable: true, settle: 10 * time.Second},
		{desc: "exits later", command: "sleep 1; exit 3", exit: "i1: instance process on h1 exited with status 3"},
		{desc: "killed from outside", command: "sleep 30", exit: "was killed by signal 9", killIt: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			d, exits := newProcDriverSettle(t, t.TempDir(), tc.settle)
			err := d.Spawn(context.Background(), procBuild("i1", tc.command))
			if tc.spawnErr != "" {
				var be *BuildError
				if !errors.As(err, &be) || !strings.Contains(be.Reason, tc.spawnErr) || be.Reschedulable != tc.reschedulable {
					t.Fatalf("Spawn = %#v; want a BuildError saying %q, reschedulable %v", err, tc.spawnErr, tc.reschedulable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.killIt {
				_ = syscall.Kill(pidOf(t, d, "i1"), syscall.SIGKILL)
			}
			select {
			case got := <-exits:
				if !strings.Contains(got, tc.exit) {
					t.Fatalf("exit reported as %q, want %q", got, tc.exit)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("exit never reported")
			}
			if ids, _ := d.List(context.Background()); len(ids) != 0 {
				t.Fatalf("List after exit = %v", ids)
			}
		})
	}
}

func TestProcessDriverAdoptsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	d1, _ := newProcDriver(t, dir)
	if err := d1.Spawn(ctx, procBuild("live", "sleep 30")); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, d1, "live")
	// A record of a process that died while no agent ran.
	stale := procState{UUID: "dead", PID: 1 << 22, StartTime: 1, Command: "x"}
	if err := d1.writeState(stale); err != nil {
		t.Fatal(err)
	}

	d2, exits := newProcDriver(t, dir) // the restarted agent's driver
	if ids, _ := d2.List(ctx); len(ids) != 1 || ids[0] != "live" {
		t.Fatalf("adopted %v, want [live]", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, "h1", "dead.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale record kept")
	}
	if err := d2.Destroy(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, fmt.Sprintf("adopted process %d stopped", pid), func() bool { return gone(pid) })
	select {
	case e := <-exits:
		t.Fatalf("a Destroy of an adopted process was reported as an exit: %s", e)
	default:
	}
}

// The command comes from the image when its argv is set, else from the
// flavor's berth:command, else from the driver's default.
func TestProcessDriverCommandSource(t *testing.T) {
	d, err := NewProcessDriver("h1", ProcessConfig{StateDir: t.TempDir(), Command: "sleep 7"})
	if err != nil {
		t.Fatal(err)
	}
	withImage := func(b *etcdschema.Build, argv ...string) *etcdschema.Build {
		b.Image = &etcdschema.BootImage{ID: "img", Name: "img", Command: argv}
		return b
	}
	cases := []struct {
		desc string
		b    *etcdschema.Build
		want string
	}{
		{"image argv, quoted", withImage(procBuild("i", "sleep 1"), "echo", "it's", "$HOME"), `'echo' 'it'\''s' '$HOME'`},
		{"image without a command: the flavor's", withImage(procBuild("i", "sleep 1")), "sleep 1"},
		{"no image: the flavor's", procBuild("i", "sleep 2"), "sleep 2"},
		{"neither: the default", procBuild("i", ""), "sleep 7"},
	}
	for _, tc := range cases {
		if got, err := d.command(tc.b); err != nil || got != tc.want {
			t.Errorf("%s: command = %q, %v; want %q", tc.desc, got, err, tc.want)
		}
	}
}

// An image's argv reaches the program element by element.
func TestProcessDriverSpawnsTheImageCommand(t *testing.T) {
	dir := t.TempDir()
	d, _ := newProcDriver(t, dir)
	b := procBuild("i1", "exit 3")
	b.Image = &etcdschema.BootImage{ID: "img", Command: []string{"sh", "-c", `printf %s "$1" > arg.txt; sleep 30`, "sh", "it's $a b"}}
	if err := d.Spawn(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the image's command wrote its argument", func() bool {
		got, _ := os.ReadFile(filepath.Join(dir, "h1", "arg.txt"))
		return string(got) == "it's $a b"
	})
}

func TestProcessDriverRejectsUnreadableState(t *testing.T) {
	cases := []struct {
		desc string
		rel  string
	}{
		{"in the host's own directory", filepath.Join("h1", "x.json")},
		{"in the shared layout of earlier versions", "x.json"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "h1"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, tc.rel), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := NewProcessDriver("h1", ProcessConfig{StateDir: dir})
			if err == nil || !strings.Contains(err.Error(), "unreadable state record") {
				t.Fatalf("want an error naming the unreadable record, got %v", err)
			}
		})
	}
}

// Two hosts' drivers on one StateDir (berth dev's agents) each run their
// own copy of a moving guest: the source's stop leaves the destination's
// process and record alone, and each restarted driver adopts only its
// own.
func TestProcessDriverHostsShareAStateDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func(host string) *ProcessDriver {
		d, err := NewProcessDriver(host, ProcessConfig{StateDir: dir, StopGrace: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), "i1") })
		return d
	}
	src, dst := open("h1"), open("h2")
	if err := src.Spawn(ctx, procBuild("i1", "sleep 30")); err != nil {
		t.Fatal(err)
	}
	srcPID := pidOf(t, src, "i1")
	// The move: the destination starts its guest, the source stops its own.
	if err := dst.Spawn(ctx, procBuild("i1", "sleep 30")); err != nil {
		t.Fatal(err)
	}
	dstPID := pidOf(t, dst, "i1")
	if dstPID == srcPID {
		t.Fatal("the destination did not start a process of its own")
	}
	if err := src.Destroy(ctx, "i1"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the source's process stopped", func() bool { return gone(srcPID) })
	if gone(dstPID) {
		t.Fatal("the source's stop ended the destination's process")
	}
	if _, err := os.Stat(filepath.Join(dir, "h2", "i1.json")); err != nil {
		t.Fatalf("the destination's record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "h1", "i1.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the source's record kept: %v", err)
	}
	// Restarted agents: h2 adopts the guest, h1 finds none.
	if ids, _ := open("h2").List(ctx); strings.Join(ids, ",") != "i1" {
		t.Fatalf("h2 adopted %v, want [i1]", ids)
	}
	if ids, _ := open("h1").List(ctx); len(ids) != 0 {
		t.Fatalf("h1 adopted %v, want none", ids)
	}
}

// An agent upgraded from the shared layout (records straight in
// StateDir) takes over the records of its own guests, known by the
// BERTH_HOST they were started with, leaves another host's, and drops
// the records of processes that are gone.
func TestProcessDriverAdoptsTheSharedLayout(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	spawnOld := func(uuid, host string) int {
		cmd := exec.Command("/bin/sh", "-c", "sleep 30")
		cmd.Env = append(os.Environ(), "BERTH_INSTANCE_UUID="+uuid, "BERTH_HOST="+host)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		go func() { _ = cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		writeRecord(t, filepath.Join(dir, uuid+".json"), procState{UUID: uuid, PID: pid, StartTime: procStartTime(pid), Command: "sleep 30"})
		if err := os.WriteFile(filepath.Join(dir, uuid+".log"), []byte("output of "+uuid), 0o644); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	minePID := spawnOld("mine", "h1")
	spawnOld("theirs", "h2")
	writeRecord(t, filepath.Join(dir, "dead.json"), procState{UUID: "dead", PID: 1 << 22, StartTime: 1, Command: "x"})

	d, err := NewProcessDriver("h1", ProcessConfig{StateDir: dir, StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := d.List(ctx); strings.Join(ids, ",") != "mine" {
		t.Fatalf("h1 adopted %v, want [mine]", ids)
	}
	for _, want := range []struct {
		path   string
		exists bool
	}{
		{filepath.Join(dir, "h1", "mine.json"), true},
		{filepath.Join(dir, "h1", "mine.log"), true},
		{filepath.Join(dir, "mine.json"), false},
		{filepath.Join(dir, "theirs.json"), true},
		{filepath.Join(dir, "theirs.log"), true},
		{filepath.Join(dir, "dead.json"), false},
	} {
		_, err := os.Stat(want.path)
		if (err == nil) != want.exists {
			t.Errorf("%s: exists %v, want %v", want.path, err == nil, want.exists)
		}
	}
	d2, err := NewProcessDriver("h2", ProcessConfig{StateDir: dir, StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := d2.List(ctx); strings.Join(ids, ",") != "theirs" {
		t.Fatalf("h2 adopted %v, want [theirs]", ids)
	}
	// The adopted guest is the agent's to stop, as its own are.
	if err := d.Destroy(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the adopted guest stopped", func() bool { return gone(minePID) })
	if err := d2.Destroy(ctx, "theirs"); err != nil {
		t.Fatal(err)
	}
}

func writeRecord(t *testing.T, path string, st procState) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A move's prep on a process-driver host fails (reschedulably) when the
// host has no command for the guest, before the source stops it.
func TestProcessDriverPrepareMove(t *testing.T) {
	for _, tc := range []struct {
		desc, defaultCommand, flavorCommand string
		fails                               bool
	}{
		{"the flavor's command", "", "sleep 1", false},
		{"the host's default", "sleep 2", "", false},
		{"neither", "", "", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := NewProcessDriver("h1", ProcessConfig{StateDir: t.TempDir(), Command: tc.defaultCommand})
			if err != nil {
				t.Fatal(err)
			}
			err = moverOf(d).PrepareMove(context.Background(), procBuild("i1", tc.flavorCommand))
			if !tc.fails {
				if err != nil {
					t.Fatalf("prep: %v", err)
				}
				return
			}
			if be := asBuildError(err); err == nil || !be.Reschedulable || !strings.Contains(be.Reason, "no default command") {
				t.Fatalf("prep: %v, want a reschedulable failure naming the missing command", err)
			}
			if ids, _ := d.List(context.Background()); len(ids) != 0 {
				t.Fatalf("prep started %v", ids)
			}
		})
	}
}
