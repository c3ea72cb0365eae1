package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// `berth bench -fleet-procs N` runs the simulated hosts in N child
// processes of the same binary (`berth bench fleet-process`), each a
// Fleet of a contiguous range of the hosts with an etcd client of its
// own, so that the tool's process CPU is Berth's (etcd, the API, the
// schedulers and conductors) and the clients' and recorder's, not the
// fleet's: at 100,000 hosts the fleet's liveness beats and syncs alone
// take more than the 2 cores. Every key, value and transaction is still
// the agent's own (Fleet); only the process differs. The children's CPU
// is reported on a row of its own, not in the process figure.
//
// The tool drives a child over its stdin, one command a line, and the
// child answers each with one JSON line (fleetStatus) on its stdout:
// "register" starts registering its hosts, "status" reports, "reset-late"
// restarts the late-start maximum, "close" stops the periodic work,
// revokes (or leaves) the leases and ends the child. A child whose
// cast watch fails exits non-zero, which fails the run.

// FleetProcessCmd is the hidden `berth bench` verb a fleet child runs
// (FleetProcess).
const FleetProcessCmd = "fleet-process"

// fleetStatus is a fleet child's answer to each command.
type fleetStatus struct {
	Registered   int             `json:"registered"`
	RegisterDone bool            `json:"register_done"`
	Error        string          `json:"error,omitempty"`
	Worked       int64           `json:"worked"`
	Background   BackgroundStats `json:"background"`
}

// FleetProcess is the child, its exit status: `berth bench fleet-process
// -etcd URLS -first I -hosts N -total-hosts T [fleet flags]`, as
// fleetProcs.startOne runs it.
func FleetProcess(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth bench "+FleetProcessCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg FleetConfig
	var (
		etcdEps  = fs.String("etcd", "", "comma-separated etcd endpoints (required)")
		prefix   = fs.String("prefix", "", "etcd key prefix")
		logLevel = fs.String("log-level", "warn", "log level")
		fromRev  = fs.Int64("from-rev", 0, "revision the cast watch starts from (required)")
		profile  = fs.String("cpuprofile", "", "write a CPU profile between the profile-start and profile-stop commands to FILE")
	)
	fs.IntVar(&cfg.FirstHost, "first", 1, "number of the first host (1-based)")
	fs.IntVar(&cfg.Hosts, "hosts", 0, "how many hosts from -first")
	fs.IntVar(&cfg.Cells, "cells", 1, "cells (hosts are spread over them by number)")
	fs.StringVar(&cfg.HostPrefix, "host-prefix", "", "host name prefix")
	fs.DurationVar(&cfg.BuildTime, "build-time", 0, "simulated build time")
	fs.Float64Var(&cfg.FailureRate, "failure-rate", 0, "reschedulable build failure rate")
	fs.StringVar(&cfg.Liveness, "liveness", "", "per-host or shared")
	fs.DurationVar(&cfg.ReportInterval, "report-interval", 0, "liveness period")
	fs.DurationVar(&cfg.ServiceDownTime, "service-down-time", 0, "lease TTL")
	fs.DurationVar(&cfg.ProviderSyncInterval, "provider-sync-interval", 0, "provider sync period")
	fs.DurationVar(&cfg.InstanceSyncInterval, "instance-sync-interval", 0, "instance sync period")
	fs.BoolVar(&cfg.SkipSyncs, "skip-syncs", false, "no periodic syncs")
	fs.BoolVar(&cfg.LeaveLeases, "leave-leases", false, "leave the leases to expire at the end")
	fs.IntVar(&cfg.RegisterWorkers, "register-workers", 0, "hosts registering at once")
	fs.IntVar(&cfg.BackgroundWorkers, "background-workers", 0, "goroutines of each periodic task")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *etcdEps == "" || *fromRev <= 0 || cfg.Hosts < 1 {
		fmt.Fprintf(stderr, "berth bench %s: -etcd, -from-rev and -hosts are required\n", FleetProcessCmd)
		return 2
	}
	conf, err := loadOrDefaults("")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	conf.Log.Level = *logLevel
	log := logging.New(conf.Log, stderr).Named(fmt.Sprintf("fleet-%d", cfg.FirstHost))
	// A client as the tool's own (startTarget): the etcd the tool started.
	cc := clientv3.Config{Endpoints: strings.Split(*etcdEps, ","), DialTimeout: conf.Etcd.DialTimeout,
		DialOptions: etcdgrpc.DialOptions()}
	if err := runFleetProcess(cc, etcdschema.New(*prefix), cfg, *fromRev, *profile, stdin, stdout, log); err != nil {
		fmt.Fprintf(stderr, "berth bench %s: %v\n", FleetProcessCmd, err)
		return 1
	}
	return 0
}

func runFleetProcess(cc clientv3.Config, keys etcdschema.Keys, cfg FleetConfig, fromRev int64, profile string,
	stdin io.Reader, stdout io.Writer, log hclog.Logger) error {
	cli, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	rawtxn.Networked(cli, cc)
	defer cli.Close()
	f, err := NewFleet(cli, keys, placement.New(cli, keys, log), cfg, log)
	if err != nil {
		return err
	}
	prof := &childProfile{path: profile}
	defer prof.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx, fromRev) }()
	var registered atomic.Int64
	var regMu sync.Mutex
	var regDone bool
	var regErr error
	var regWG sync.WaitGroup
	defer regWG.Wait()
	enc := json.NewEncoder(stdout)
	answer := func() error {
		regMu.Lock()
		st := fleetStatus{Registered: int(registered.Load()), RegisterDone: regDone, Worked: f.Worked(), Background: f.Background()}
		if regErr != nil {
			st.Error = regErr.Error()
		}
		regMu.Unlock()
		return enc.Encode(st)
	}
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
	}()
	for {
		select {
		case err := <-runErr:
			f.Close()
			if err == nil {
				err = errors.New("the cast watch ended")
			}
			return err
		case cmd, ok := <-cmds:
			if !ok || cmd == "close" {
				f.Close()
				cancel()
				if err := <-runErr; err != nil {
					return err
				}
				if ok {
					return answer()
				}
				return nil
			}
			switch cmd {
			case "register":
				regWG.Add(1)
				go func() {
					defer regWG.Done()
					err := f.Register(ctx, func(n int) { registered.Store(int64(n)) })
					regMu.Lock()
					regDone, regErr = true, err
					regMu.Unlock()
				}()
			case "reset-late":
				f.ResetLate()
			case "profile-start":
				if err := prof.start(); err != nil {
					return err
				}
			case "profile-stop":
				prof.stop()
			case "status":
			default:
				return fmt.Errorf("unknown command %q", cmd)
			}
			if err := answer(); err != nil {
				return err
			}
		}
	}
}

// childProfile is a fleet child's CPU profile (-cpuprofile): the tool
// starts and stops it with its own profile's phase, so the two cover the
// same time.
type childProfile struct {
	path string
	f    *os.File // open while profiling
}

func (p *childProfile) start() error {
	if p.path == "" || p.f != nil {
		return nil
	}
	f, err := os.Create(p.path)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	p.f = f
	return nil
}

func (p *childProfile) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
	p.f = nil
}

// hostFleet is what the scenarios use of the simulated hosts: a Fleet in
// the tool's process, or fleetProcs.
type hostFleet interface {
	Hosts() int
	HostName(i int) string
	Liveness() string
	Intervals() agent.Intervals
	Run(ctx context.Context, fromRev int64) error
	Register(ctx context.Context, progress func(done int)) error
	Worked() int64
	Background() BackgroundStats
	ResetLate()
	Close()
}

var (
	_ hostFleet = (*Fleet)(nil)
	_ hostFleet = (*fleetProcs)(nil)
)

// fleetProcs is the simulated fleet run as child processes.
type fleetProcs struct {
	cfg       FleetConfig
	every     agent.Intervals
	endpoints []string
	prefix    string
	logLevel  string
	stderr    io.Writer
	// profile is the prefix of the children's CPU profiles (child N
	// writes profile.N); "" for none.
	profile string

	started  chan struct{} // closed once Run has started the children (or failed to)
	startErr error
	procs    []*fleetProc
	stopping atomic.Bool
	worked   atomic.Int64 // as of the last status
}

type fleetProc struct {
	cmd     *exec.Cmd
	mu      sync.Mutex // one command at a time
	in      io.WriteCloser
	out     *bufio.Scanner
	done    chan struct{} // closed once reaped
	waitErr error
}

func newFleetProcs(n int, cfg FleetConfig, endpoints []string, prefix, logLevel string, stderr io.Writer, log hclog.Logger) (*fleetProcs, error) {
	if n < 1 || n > cfg.Hosts {
		return nil, fmt.Errorf("fleet processes: %d for %d hosts", n, cfg.Hosts)
	}
	// The defaults of the whole fleet (not of one host: its worker
	// pools are sized by the hosts, and each child gets its share).
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.FirstHost = 1
	// The periods after the agent's defaults, from one agent never run.
	one := cfg
	one.Hosts = 1
	f, err := NewFleet(nil, etcdschema.New(prefix), nil, one, log)
	if err != nil {
		return nil, err
	}
	p := &fleetProcs{cfg: cfg, every: f.Intervals(), endpoints: endpoints, prefix: prefix, logLevel: logLevel,
		stderr: stderr, started: make(chan struct{})}
	p.procs = make([]*fleetProc, n)
	return p, nil
}

func (p *fleetProcs) Hosts() int                 { return p.cfg.Hosts }
func (p *fleetProcs) HostName(i int) string      { return hostName(p.cfg.HostPrefix, i) }
func (p *fleetProcs) Liveness() string           { return p.cfg.Liveness }
func (p *fleetProcs) Intervals() agent.Intervals { return p.every }

// Worked is the casts the children have worked, asked now (the count of
// the last answer if one cannot answer).
func (p *fleetProcs) Worked() int64 {
	select {
	case <-p.started:
		if p.startErr == nil {
			_, _, _ = p.all("status")
		}
	default:
	}
	return p.worked.Load()
}

// Run starts the children, their cast watches from fromRev, and waits
// until ctx ends or one of them exits unasked (an error).
func (p *fleetProcs) Run(ctx context.Context, fromRev int64) error {
	p.startErr = p.start(fromRev)
	close(p.started)
	if p.startErr != nil {
		return p.startErr
	}
	exited := make(chan *fleetProc, len(p.procs))
	for _, c := range p.procs {
		go func() { <-c.done; exited <- c }()
	}
	select {
	case <-ctx.Done():
		return nil
	case c := <-exited:
		if p.stopping.Load() {
			return nil
		}
		return fmt.Errorf("fleet process %d exited: %v", c.cmd.Process.Pid, c.waitErr)
	}
}

func (p *fleetProcs) start(fromRev int64) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("fleet processes: %w", err)
	}
	n, hosts := len(p.procs), p.cfg.Hosts
	for i := range p.procs {
		first, last := 1+i*hosts/n, (i+1)*hosts/n
		c, err := p.startOne(exe, fromRev, i+1, first, last-first+1)
		if err != nil {
			return fmt.Errorf("fleet process %d: %w", i+1, err)
		}
		p.procs[i] = c
	}
	return nil
}

func (p *fleetProcs) startOne(exe string, fromRev int64, child, first, hosts int) (*fleetProc, error) {
	cfg := p.cfg
	args := []string{"bench", FleetProcessCmd, "-etcd", strings.Join(p.endpoints, ","), "-prefix", p.prefix,
		"-log-level", p.logLevel, "-from-rev", strconv.FormatInt(fromRev, 10),
		"-first", strconv.Itoa(first), "-hosts", strconv.Itoa(hosts), "-cells", strconv.Itoa(cfg.Cells),
		"-host-prefix", cfg.HostPrefix, "-build-time", cfg.BuildTime.String(),
		"-failure-rate", strconv.FormatFloat(cfg.FailureRate, 'g', -1, 64), "-liveness", cfg.Liveness,
		"-report-interval", cfg.ReportInterval.String(), "-service-down-time", cfg.ServiceDownTime.String(),
		"-provider-sync-interval", cfg.ProviderSyncInterval.String(), "-instance-sync-interval", cfg.InstanceSyncInterval.String(),
		"-skip-syncs=" + strconv.FormatBool(cfg.SkipSyncs), "-leave-leases=" + strconv.FormatBool(cfg.LeaveLeases),
		"-register-workers", strconv.Itoa(max(1, cfg.RegisterWorkers/len(p.procs))),
		"-background-workers", strconv.Itoa(max(1, cfg.BackgroundWorkers/len(p.procs)))}
	if p.profile != "" {
		args = append(args, "-cpuprofile", fmt.Sprintf("%s.%d", p.profile, child))
	}
	c := &fleetProc{cmd: exec.Command(exe, args...), done: make(chan struct{})}
	c.cmd.Env = fleetChildEnv(os.Environ())
	// The child dies with the tool, however the tool ends (as a
	// scheduler child does).
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = p.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewScanner(out)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// fleetChildEnv is the environment of a fleet child: the tool's, with
// goroutine stacks never shrunk by the collector (GODEBUG
// gcshrinkstackoff=1, added to what GODEBUG already says). The child's
// work is thousands of pooled workers, each parked between jobs: every
// collection shrank the parked ones' stacks, and the next job grew them
// back (runtime.newstack and copystack were 8% of a child's CPU at
// 20,000 hosts, most of it under the etcd client's gRPC calls). The
// stacks kept cost the memory of their largest use, a few KB a worker.
func fleetChildEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := "gcshrinkstackoff=1"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				debug += "," + v // the operator's own say comes last, and wins
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// do sends one command and reads the child's answer.
func (c *fleetProc) do(cmd string) (fleetStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st fleetStatus
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		return st, fmt.Errorf("fleet process %d: %s: %w", c.cmd.Process.Pid, cmd, err)
	}
	if !c.out.Scan() {
		return st, fmt.Errorf("fleet process %d: %s: no answer (%v)", c.cmd.Process.Pid, cmd, c.out.Err())
	}
	if err := json.Unmarshal(c.out.Bytes(), &st); err != nil {
		return st, fmt.Errorf("fleet process %d: %s: %w", c.cmd.Process.Pid, cmd, err)
	}
	return st, nil
}

// children is the child processes once Run has started them (an entry is
// nil for one a failed start never reached), and none before: start
// writes p.procs while the tool may already ask for its progress, CPU or
// background counts, and a read ordered after started's close sees every
// write start made.
func (p *fleetProcs) children() []*fleetProc {
	select {
	case <-p.started:
		return p.procs
	default:
		return nil
	}
}

// all sends cmd to every child and sums their answers.
func (p *fleetProcs) all(cmd string) (fleetStatus, bool, error) {
	var sum fleetStatus
	done := true
	for _, c := range p.children() {
		if c == nil {
			continue
		}
		st, err := c.do(cmd)
		if err != nil {
			return sum, false, err
		}
		if st.Error != "" {
			return sum, false, fmt.Errorf("fleet process %d: %s", c.cmd.Process.Pid, st.Error)
		}
		done = done && st.RegisterDone
		sum.Registered += st.Registered
		sum.Worked += st.Worked
		b, s := &sum.Background, st.Background
		b.Renewals += s.Renewals
		b.ProviderSyncs += s.ProviderSyncs
		b.InstanceSyncs += s.InstanceSyncs
		b.InstanceSyncWrites += s.InstanceSyncWrites
		b.Failures += s.Failures
		b.Regrants += s.Regrants
		b.Overlapped += s.Overlapped
		b.PeriodLate += s.PeriodLate
		b.MaxLate = max(b.MaxLate, s.MaxLate)
		b.Liveness.Add(s.Liveness)
	}
	p.worked.Store(sum.Worked)
	return sum, done, nil
}

// Register has every child register its hosts, and waits for them all.
func (p *fleetProcs) Register(ctx context.Context, progress func(done int)) error {
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.startErr != nil {
		return p.startErr
	}
	if _, _, err := p.all("register"); err != nil {
		return err
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		st, done, err := p.all("status")
		if err != nil {
			return err
		}
		if progress != nil {
			progress(st.Registered)
		}
		if done {
			return nil
		}
	}
}

// Background is the children's periodic work so far, summed (MaxLate:
// the longest of theirs). A child that cannot answer counts nothing.
func (p *fleetProcs) Background() BackgroundStats {
	st, _, _ := p.all("status")
	return st.Background
}

// profiling wraps onPhase so that the children profile phase too
// (-fleet-cpuprofile): from its start, or from the first phase's for
// "all", to its end (to the children's end for "all").
func (p *fleetProcs) profiling(phase string, onPhase func(string) func()) func(string) func() {
	if p.profile == "" {
		return onPhase
	}
	return func(ph string) func() {
		end := onPhase(ph)
		if phase != "all" && ph != phase {
			return end
		}
		if <-p.started; p.startErr != nil {
			return end
		}
		if _, _, err := p.all("profile-start"); err != nil {
			fmt.Fprintf(p.stderr, "berth bench: fleet processes' CPU profiles: %v\n", err)
		}
		if phase == "all" {
			return end
		}
		return func() {
			_, _, _ = p.all("profile-stop")
			end()
		}
	}
}

// ResetLate restarts every child's MaxLate.
func (p *fleetProcs) ResetLate() { _, _, _ = p.all("reset-late") }

// CPU is the CPU the children used so far (user + system).
func (p *fleetProcs) CPU() time.Duration {
	var sum time.Duration
	for _, c := range p.children() {
		if c != nil {
			sum += childCPU(c.cmd, c.done)
		}
	}
	return sum
}

// Close tells every child to stop (its leases revoked unless
// LeaveLeases) and waits for it, killing one that does not end in time.
func (p *fleetProcs) Close() {
	p.stopping.Store(true)
	select {
	case <-p.started:
	default:
		return // never started
	}
	var wg sync.WaitGroup
	for _, c := range p.procs {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.do("close")
			c.in.Close()
			select {
			case <-c.done:
			case <-time.After(10*time.Second + time.Duration(p.cfg.Hosts/len(p.procs))*2*time.Millisecond):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}()
	}
	wg.Wait()
}
