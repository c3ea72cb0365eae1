package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/placement"
)

// `berth bench -scheduler-procs` runs each scheduler (with its
// superconductor: the roles of an in-process scheduler stack) as a child
// process of the same binary, `berth bench scheduler-process`, optionally
// in a CPU cgroup of its own (-scheduler-cpu): schedulers on machines of
// their own, emulated, rather than goroutines sharing the tool's cores.
// etcd, the API and the cell conductors stay in the tool's process.
//
// The child is `berth server`'s scheduler and superconductor roles plus a
// loopback control listener that gives the tool what an in-process stack
// gives it directly: wait until the indexes have seen a revision
// (Target.Sync), the placement claim counters (Target.ClaimStats) and the
// scheduler's election id (Target.KillLeader).

// SchedulerProcessCmd is the hidden `berth bench` verb a child runs
// (SchedulerProcess).
const SchedulerProcessCmd = "scheduler-process"

// benchControlName is the banner name of the child's control listener.
const benchControlName = "bench control"

// schedProcInfo is what a child's /bench/info answers.
type schedProcInfo struct {
	PID         int    `json:"pid"`
	SchedulerID string `json:"scheduler_id"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
}

// SchedulerProcess is the child, its exit status: `berth bench
// scheduler-process -etcd URL [-config F] [-prefix P] [-workers N]
// [-log-level L] [-name N]`, as schedProcs.startOne runs it.
func SchedulerProcess(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth bench "+SchedulerProcessCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfgPath  = fs.String("config", "", "HCL config (scheduler and superconductor options)")
		etcdEps  = fs.String("etcd", "", "comma-separated etcd endpoints (required)")
		prefix   = fs.String("prefix", "", "etcd key prefix")
		workers  = fs.Int("workers", 0, "superconductor workers (0: the config's)")
		logLevel = fs.String("log-level", "warn", "log level")
		name     = fs.String("name", "berth-scheduler", "logger name")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *etcdEps == "" {
		fmt.Fprintf(stderr, "berth bench %s: -etcd is required\n", SchedulerProcessCmd)
		return 2
	}
	cfg, err := loadOrDefaults(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	cfg.Log.Level = *logLevel
	if *prefix != "" {
		cfg.Etcd.Prefix = *prefix
	}
	cfg.Etcd.Embedded, cfg.Etcd.Endpoints = nil, strings.Split(*etcdEps, ",")
	// The roles of startTarget's in-process scheduler stacks.
	cfg.EnableAllRoles()
	cfg.Placement, cfg.API, cfg.Conductor = nil, nil, nil
	cfg.Scheduler.Bind, cfg.Scheduler.AdvertiseURL = "127.0.0.1:0", ""
	cfg.Status.Bind = ""
	// GET /bench/sync waits for the child to catch up with a populate of
	// up to 100,000 hosts, on a fraction of a CPU: it may take longer than
	// the http block's read_timeout, which would end its context.
	cfg.HTTP.ReadTimeout, cfg.HTTP.WriteTimeout = time.Hour, time.Hour
	if *workers > 0 {
		cfg.Superconductor.Workers = *workers
	}
	log := logging.New(cfg.Log, stderr).Named(*name)
	err = stack.Run("bench scheduler", cfg, log, stdout, func(ctx context.Context, s *stack.Stack) error {
		if err := s.StartServerRoles(ctx); err != nil {
			return err
		}
		return s.Serve(benchControlName, "127.0.0.1:0", benchControl(s))
	})
	if err != nil {
		return 1
	}
	return 0
}

// benchControl is the child's control API, on loopback.
func benchControl(s *stack.Stack) http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /bench/info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, schedProcInfo{PID: os.Getpid(), SchedulerID: s.SchedulerID(), GOMAXPROCS: runtime.GOMAXPROCS(0)})
	})
	mux.HandleFunc("GET /bench/claims", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Placement().ClaimStats())
	})
	mux.HandleFunc("GET /bench/sync", func(w http.ResponseWriter, r *http.Request) {
		rev, err := strconv.ParseInt(r.URL.Query().Get("rev"), 10, 64)
		if err != nil {
			http.Error(w, "rev: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.WaitForRevision(r.Context(), rev); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// schedProcs starts and owns the scheduler processes of one run.
type schedProcs struct {
	n        int
	cpu      float64 // CPUs of quota each (0: no cgroup)
	cfgPath  string
	prefix   string
	workers  int
	logLevel string
	stderr   io.Writer
	log      hclog.Logger
	// onExit is told when a child exits that the tool neither killed nor
	// stopped: the run cannot go on with a scheduler missing unseen.
	onExit func(error)

	procs    []*schedProc
	stopping atomic.Bool
	http     *http.Client
}

type schedProc struct {
	n       int
	cmd     *exec.Cmd
	control string
	info    schedProcInfo
	group   *cpuGroup
	done    chan struct{} // closed once reaped
	waitErr error
	killed  atomic.Bool

	mu     sync.Mutex
	claims placement.ClaimStats // the last counters read (a killed child's stay)
}

// start starts the children against etcd at endpoint and waits until
// each has registered its scheduler and synced its superconductor.
func (p *schedProcs) start(ctx context.Context, endpoint string) error {
	p.http = &http.Client{}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("scheduler processes: %w", err)
	}
	var parent string
	var v2 bool
	if p.cpu > 0 {
		if parent, v2, err = cpuCgroupParent(); err != nil {
			return fmt.Errorf("-scheduler-cpu: %w", err)
		}
		removeStaleCPUGroups(parent, p.log)
	}
	for i := 1; i <= p.n; i++ {
		c := &schedProc{n: i, done: make(chan struct{})}
		if p.cpu > 0 {
			if c.group, err = newCPUGroup(parent, v2, i, p.cpu); err != nil {
				return err
			}
		}
		p.procs = append(p.procs, c)
		if err := p.startOne(ctx, c, exe, endpoint); err != nil {
			return fmt.Errorf("scheduler process %d: %w", i, err)
		}
	}
	return nil
}

func (p *schedProcs) startOne(ctx context.Context, c *schedProc, exe, endpoint string) error {
	args := []string{"bench", SchedulerProcessCmd, "-etcd", endpoint, "-prefix", p.prefix,
		"-log-level", p.logLevel, "-name", fmt.Sprintf("berth-%d", c.n)}
	if p.cfgPath != "" {
		args = append(args, "-config", p.cfgPath)
	}
	if p.workers > 0 {
		args = append(args, "-workers", strconv.Itoa(p.workers))
	}
	c.cmd = exec.Command(exe, args...)
	// The child dies with the tool, however the tool ends: SIGKILL when
	// the thread that forked it exits (Go keeps its threads unless a
	// goroutine locked to one ends; stop is the normal path).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = p.stderr
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	c.cmd.Stdout = w
	if err := c.cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	w.Close()
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
		if !c.killed.Load() && !p.stopping.Load() && p.onExit != nil {
			p.onExit(fmt.Errorf("scheduler process %d (pid %d) exited: %v", c.n, c.cmd.Process.Pid, c.waitErr))
		}
	}()
	if c.group != nil {
		// The child starts outside its group and is moved at once: Go's
		// runtime re-reads the cgroup CPU limit periodically, so its
		// GOMAXPROCS follows (/bench/info says what it chose).
		if err := c.group.add(c.cmd.Process.Pid); err != nil {
			_ = c.cmd.Process.Kill()
			r.Close()
			return err
		}
	}
	// The banner (stdout) names the control listener once the roles run.
	found := make(chan string, 1)
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			name, url, ok := cutLast(sc.Text())
			if ok && name == benchControlName {
				select {
				case found <- url:
				default:
				}
			}
		}
	}()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	select {
	case c.control = <-found:
	case <-c.done:
		return fmt.Errorf("exited while starting: %v", c.waitErr)
	case <-timer.C:
		_ = c.cmd.Process.Kill()
		return errors.New("did not start within 2m")
	case <-ctx.Done():
		_ = c.cmd.Process.Kill()
		return ctx.Err()
	}
	if err := p.get(ctx, c, "/bench/info", &c.info); err != nil {
		return err
	}
	p.log.Info("scheduler process started", "n", c.n, "pid", c.info.PID, "scheduler_id", c.info.SchedulerID,
		"gomaxprocs", c.info.GOMAXPROCS, "cgroup", groupDir(c.group))
	return nil
}

func groupDir(g *cpuGroup) string {
	if g == nil {
		return ""
	}
	return g.dir
}

// cutLast splits a banner line "name   URL" at its last field.
func cutLast(line string) (string, string, bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", "", false
	}
	return strings.Join(f[:len(f)-1], " "), f[len(f)-1], true
}

func (p *schedProcs) get(ctx context.Context, c *schedProc, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.control+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("scheduler process %d: %w", c.n, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("scheduler process %d: GET %s: %s: %s", c.n, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if into == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("scheduler process %d: GET %s: %w", c.n, path, err)
	}
	return nil
}

// live is the children the tool has not killed.
func (p *schedProcs) live() []*schedProc {
	var out []*schedProc
	for _, c := range p.procs {
		if !c.killed.Load() && c.control != "" {
			out = append(out, c)
		}
	}
	return out
}

// sync waits until every live child's placement index and host manager
// have applied rev.
func (p *schedProcs) sync(ctx context.Context, rev int64) error {
	for _, c := range p.live() {
		if err := p.get(ctx, c, "/bench/sync?rev="+strconv.FormatInt(rev, 10), nil); err != nil {
			return err
		}
	}
	return nil
}

// claimStats sums the children's placement claim counters; a child that
// does not answer (killed) counts with the last counters read from it.
func (p *schedProcs) claimStats() placement.ClaimStats {
	var sum placement.ClaimStats
	for _, c := range p.procs {
		if !c.killed.Load() && c.control != "" {
			var cs placement.ClaimStats
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := p.get(ctx, c, "/bench/claims", &cs)
			cancel()
			if err == nil {
				c.mu.Lock()
				c.claims = cs
				c.mu.Unlock()
			} else {
				p.log.Warn("claim counters of a scheduler process unread; using the last read", "error", err)
			}
		}
		c.mu.Lock()
		sum.Add(c.claims)
		c.mu.Unlock()
	}
	return sum
}

// kill SIGKILLs the child whose scheduler election id is id (after
// reading its claim counters one last time) and waits until it is reaped.
func (p *schedProcs) kill(ctx context.Context, id string) error {
	for _, c := range p.live() {
		if c.info.SchedulerID != id {
			continue
		}
		_ = p.claimStats() // the victim's last counters
		c.killed.Store(true)
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill scheduler process %d: %w", c.n, err)
		}
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("no scheduler process started here has id %s", id)
}

// cpuTime is the CPU the children used so far (user + system, every
// thread).
func (p *schedProcs) cpuTime() time.Duration {
	var sum time.Duration
	for _, c := range p.procs {
		sum += childCPU(c.cmd, c.done)
	}
	return sum
}

// childCPU is the CPU a child process used so far: /proc/<pid>/stat
// while it runs, its rusage once reaped (done closed).
func childCPU(cmd *exec.Cmd, done <-chan struct{}) time.Duration {
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	select {
	case <-done:
		return reapedCPU(cmd)
	default:
	}
	if d, err := procStatCPU(cmd.Process.Pid); err == nil {
		return d
	}
	// It exited between the check and the read: wait for the reaper.
	select {
	case <-done:
		return reapedCPU(cmd)
	case <-time.After(5 * time.Second):
		return 0
	}
}

func reapedCPU(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStatCPU is utime + stime of process pid (all its threads).
func procStatCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name "(...)", which may hold spaces: state
	// is field 3 of the man page, utime 14 and stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// gomaxprocs is each live child's GOMAXPROCS now (the Go runtime's
// choice under its CPU quota).
func (p *schedProcs) gomaxprocs(ctx context.Context) []int {
	var out []int
	for _, c := range p.live() {
		var info schedProcInfo
		if err := p.get(ctx, c, "/bench/info", &info); err == nil {
			out = append(out, info.GOMAXPROCS)
		}
	}
	return out
}

// stop ends every child: SIGTERM (a graceful stop: the scheduler resigns,
// the superconductor hands its leases back), SIGKILL after 30s; then the
// cgroups go.
func (p *schedProcs) stop() {
	p.stopping.Store(true)
	var wg sync.WaitGroup
	for _, c := range p.procs {
		if c.cmd == nil || c.cmd.Process == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-c.done:
				return
			default:
			}
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(30 * time.Second)
			defer t.Stop()
			select {
			case <-c.done:
			case <-t.C:
				p.log.Warn("scheduler process did not stop within 30s of SIGTERM; killing it", "n", c.n)
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}()
	}
	wg.Wait()
	for _, c := range p.procs {
		if c.group != nil {
			if err := c.group.remove(); err != nil {
				p.log.Warn("cpu cgroup left behind (the next run removes it)", "error", err)
			}
		}
	}
}
