package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// CommandExtraSpec is the flavor extra spec naming the command the process
// driver runs for an instance of that flavor when its image names none;
// without either the driver's configured command runs. The command is run by /bin/sh -c.
const CommandExtraSpec = "berth:command"

// ProcessConfig configures the process driver.
type ProcessConfig struct {
	// Command runs for flavors without a berth:command extra spec.
	Command string
	// StateDir keeps, in a directory per host (StateDir/<host>), one
	// record per running instance (pid and start time) and its output, so
	// a restarted agent finds the processes it started. Empty means
	// <tmp>/berth-process: cleared by a reboot, which ends the processes
	// too.
	StateDir string
	// StopGrace is how long a delete waits after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// Settle is how long Spawn watches a new process: one that exits in
	// that time failed to build, rather than failed while ACTIVE.
	Settle time.Duration
}

// ProcessDriver runs each instance as a child process in its own process
// group. Processes outlive the agent (as VMs outlive nova-compute) and are
// adopted by the next agent from their state records.
type ProcessDriver struct {
	host string
	cfg  ProcessConfig
	// dir is this host's own directory, StateDir/<host>: agents that
	// share a StateDir (berth dev's, in one process with one config) must
	// not share records, since a move's source and destination each hold
	// one for the same instance.
	dir string

	mu      sync.Mutex
	run     map[string]*procEntry
	onExit  func(uuid, reason string)
	pending []exitNote // exits seen before NotifyExit was called
}

type exitNote struct{ uuid, reason string }

// procEntry is one instance's process.
type procEntry struct {
	state    procState
	done     chan struct{} // closed when the process has exited
	stopping bool          // Destroy asked for it: its exit is expected
	reason   string        // how it exited, once done is closed
}

// procState is the record kept in StateDir/<host>/<uuid>.json.
type procState struct {
	UUID      string    `json:"uuid"`
	Host      string    `json:"host,omitempty"` // unset in records of the shared layout
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_time"` // /proc/<pid>/stat field 22, guards against pid reuse
	Command   string    `json:"command"`
	Started   time.Time `json:"started"`
}

var (
	_ Driver       = (*ProcessDriver)(nil)
	_ ExitNotifier = (*ProcessDriver)(nil)
	_ MovePreparer = (*ProcessDriver)(nil)
)

func init() {
	RegisterDriver("process", func(host string, cfg DriverConfig) (Driver, error) {
		return NewProcessDriver(host, cfg.Process)
	})
}

// NewProcessDriver returns a process driver for host and adopts the
// processes a previous agent left running.
func NewProcessDriver(host string, cfg ProcessConfig) (*ProcessDriver, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "berth-process")
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 200 * time.Millisecond
	}
	d := &ProcessDriver{host: host, cfg: cfg, dir: filepath.Join(cfg.StateDir, host), run: map[string]*procEntry{}}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("process driver: state dir: %w", err)
	}
	if err := d.adoptSharedLayout(); err != nil {
		return nil, err
	}
	if err := d.adopt(); err != nil {
		return nil, err
	}
	return d, nil
}

// adopt reads the state records: live processes are followed again, the
// records of dead ones are removed (the agent's reconciliation then finds
// their instances missing from List).
func (d *ProcessDriver) adopt() error {
	files, err := filepath.Glob(filepath.Join(d.dir, "*.json"))
	if err != nil {
		return fmt.Errorf("process driver: list %s: %w", d.dir, err)
	}
	for _, f := range files {
		st, err := readProcState(f)
		if err != nil {
			return err
		}
		if !sameProcess(st.PID, st.StartTime) {
			_ = os.Remove(f)
			continue
		}
		e := &procEntry{state: st, done: make(chan struct{})}
		d.run[st.UUID] = e
		go d.followAdopted(e)
	}
	return nil
}

// NotifyExit sets the function told when an instance's process exits on
// its own (not by Destroy).
func (d *ProcessDriver) NotifyExit(f func(uuid, reason string)) {
	d.mu.Lock()
	d.onExit = f
	pending := d.pending
	d.pending = nil
	d.mu.Unlock()
	for _, p := range pending {
		f(p.uuid, p.reason)
	}
}

// command is what the instance runs: its image's argv when the image
// has one, else the flavor's berth:command (Berth's way before images),
// else the driver's default.
func (d *ProcessDriver) command(b *etcdschema.Build) (string, error) {
	if b.Image != nil && len(b.Image.Command) > 0 {
		return shellJoin(b.Image.Command), nil
	}
	if c := strings.TrimSpace(b.Flavor.ExtraSpecs[CommandExtraSpec]); c != "" {
		return c, nil
	}
	if c := strings.TrimSpace(d.cfg.Command); c != "" {
		return c, nil
	}
	return "", &BuildError{Reschedulable: false, Reason: fmt.Sprintf(
		"flavor %s has no %s extra spec and the process driver on %s has no default command",
		b.Flavor.Name, CommandExtraSpec, d.host)}
}

// PrepareMove checks on a move's destination that there is a command to
// run b with. Another host may have a default command where this one has
// none, so the failure is reschedulable: the move tries an alternate,
// and the server stays on its source rather than going ERROR at the
// finish.
func (d *ProcessDriver) PrepareMove(_ context.Context, b *etcdschema.Build) error {
	if _, err := d.command(b); err != nil {
		return &BuildError{Reschedulable: true, Reason: err.Error()}
	}
	return nil
}

// shellJoin quotes argv for /bin/sh -c so each element reaches the
// program as one argument, exactly as given.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Spawn starts the instance's process. Spawning an instance already
// running is a no-op, so a cast re-run after an agent restart is safe.
func (d *ProcessDriver) Spawn(ctx context.Context, b *etcdschema.Build) error {
	d.mu.Lock()
	if e, ok := d.run[b.InstanceUUID]; ok && !e.stopping {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	command, err := d.command(b)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(d.dir, b.InstanceUUID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("process driver: output file: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "BERTH_INSTANCE_UUID="+b.InstanceUUID, "BERTH_INSTANCE_NAME="+b.Name,
		"BERTH_HOST="+d.host, "BERTH_FLAVOR="+b.Flavor.Name)
	// Its own process group: a delete signals everything the command
	// started, and a signal to the agent's group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return &BuildError{Reschedulable: true, Reason: fmt.Sprintf("start %q on %s: %v", command, d.host, err)}
	}
	st := procState{UUID: b.InstanceUUID, Host: d.host, PID: cmd.Process.Pid, StartTime: procStartTime(cmd.Process.Pid),
		Command: command, Started: time.Now().UTC()}
	e := &procEntry{state: st, done: make(chan struct{})}
	d.mu.Lock()
	d.run[b.InstanceUUID] = e
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		d.exited(e, exitReason(err))
	}()
	if err := d.writeState(st); err != nil {
		d.kill(e)
		return err
	}
	t := time.NewTimer(d.cfg.Settle)
	defer t.Stop()
	select {
	case <-e.done:
		return &BuildError{Reschedulable: true, Reason: fmt.Sprintf("instance process on %s %s right after start", d.host, e.reason)}
	case <-t.C:
		return nil
	case <-ctx.Done():
		d.kill(e)
		return ctx.Err()
	}
}

func (d *ProcessDriver) writeState(st procState) error {
	b, _ := json.Marshal(st)
	p := filepath.Join(d.dir, st.UUID+".json")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("process driver: write state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("process driver: write state: %w", err)
	}
	return nil
}

// exited records how a process ended and, unless Destroy asked for it,
// tells the agent.
func (d *ProcessDriver) exited(e *procEntry, reason string) {
	d.mu.Lock()
	e.reason = reason
	expected := e.stopping
	cur, ok := d.run[e.state.UUID]
	// A newer process of the same instance keeps its entry and record.
	latest := !ok || cur == e
	if cur == e {
		delete(d.run, e.state.UUID)
	}
	if latest {
		// Before done closes: a Destroy that returned left no record
		// for the next agent to adopt.
		_ = os.Remove(filepath.Join(d.dir, e.state.UUID+".json"))
	}
	close(e.done)
	f := d.onExit
	if !expected && f == nil {
		d.pending = append(d.pending, exitNote{e.state.UUID, reason})
	}
	d.mu.Unlock()
	if !expected && f != nil {
		f(e.state.UUID, fmt.Sprintf("instance process on %s %s", d.host, reason))
	}
}

// followAdopted polls a process this agent did not start (it cannot wait
// for it) until it is gone.
func (d *ProcessDriver) followAdopted(e *procEntry) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if !sameProcess(e.state.PID, e.state.StartTime) {
			d.exited(e, "exited (status unknown: the process was adopted after an agent restart)")
			return
		}
	}
}

// Destroy stops the instance's process group: SIGTERM, then SIGKILL after
// the grace period. An unknown instance is no error.
func (d *ProcessDriver) Destroy(ctx context.Context, uuid string) error {
	d.mu.Lock()
	e, ok := d.run[uuid]
	if ok {
		e.stopping = true
	}
	d.mu.Unlock()
	if !ok {
		_ = os.Remove(filepath.Join(d.dir, uuid+".json"))
		return nil
	}
	_ = syscall.Kill(-e.state.PID, syscall.SIGTERM)
	t := time.NewTimer(d.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-e.done:
		// The leader is gone; what it started and left behind (ignoring
		// SIGTERM) goes too.
		_ = syscall.Kill(-e.state.PID, syscall.SIGKILL)
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	d.kill(e)
	select {
	case <-e.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("process driver: instance %s (pid %d) did not die after SIGKILL", uuid, e.state.PID)
	}
}

func (d *ProcessDriver) kill(e *procEntry) {
	d.mu.Lock()
	e.stopping = true
	d.mu.Unlock()
	_ = syscall.Kill(-e.state.PID, syscall.SIGKILL)
}

// List returns the instances whose processes run.
func (d *ProcessDriver) List(context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.run))
	for u, e := range d.run {
		if !e.stopping {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out, nil
}

// exitReason words a Wait error the way an operator reads it.
func exitReason(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if err != nil {
		return "ended: " + err.Error()
	}
	return "exited with status 0"
}

// procStartTime reads field 22 of /proc/<pid>/stat (start time in clock
// ticks since boot); 0 when unreadable.
func procStartTime(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields resume after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// sameProcess says whether pid is still the process recorded: alive, not a
// zombie, and started at the recorded time (a reused pid is not ours).
func sameProcess(pid int, start uint64) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return start == 0 // no /proc: trust kill(0)
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
		if f := strings.Fields(string(b)[i+1:]); len(f) > 0 && f[0] == "Z" {
			return false
		}
	}
	return start == 0 || procStartTime(pid) == start
}
