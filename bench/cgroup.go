package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A cpuGroup is a CPU cgroup of its own for one scheduler process of
// `berth bench -scheduler-procs -scheduler-cpu N`: a CFS bandwidth quota
// of N CPUs stands in for "a machine of its own with N CPUs", so adding
// schedulers adds CPU as adding machines would, instead of sharing the
// tool's cores.
type cpuGroup struct {
	dir string
	v2  bool
}

// cpuPeriodUs is the CFS period every group uses (the kernel's default).
const cpuPeriodUs = 100_000

// benchCgroupPrefix names the tool's groups: berth-bench-<tool pid>-<n>.
const benchCgroupPrefix = "berth-bench-"

// cpuCgroupParent is the directory the tool's CPU groups go under: this
// process's own group in the cgroup v1 hierarchy that has the cpu
// controller or, when there is none, in the cgroup v2 hierarchy when it
// offers cpu. It says what is missing when neither is there.
func cpuCgroupParent() (dir string, v2 bool, err error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, fmt.Errorf("cpu cgroup: %w", err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, fmt.Errorf("cpu cgroup: %w", err)
	}
	// /proc/self/cgroup: "ID:controllers:path" (v2: "0::path").
	ownPath := func(v2 bool) (string, bool) {
		for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			if v2 && f[0] == "0" && f[1] == "" {
				return f[2], true
			}
			if !v2 && hasItem(f[1], "cpu") {
				return f[2], true
			}
		}
		return "", false
	}
	var v1Dir, v2Dir string
	for _, line := range strings.Split(string(mounts), "\n") {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS"
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := f[3], f[4]
		switch {
		case g[0] == "cgroup" && hasItem(g[2], "cpu") && v1Dir == "":
			if p, ok := ownPath(false); ok {
				v1Dir = filepath.Join(point, strings.TrimPrefix(p, root))
			}
		case g[0] == "cgroup2" && v2Dir == "":
			if p, ok := ownPath(true); ok {
				v2Dir = filepath.Join(point, strings.TrimPrefix(p, root))
			}
		}
	}
	if v1Dir != "" {
		if _, err := os.Stat(filepath.Join(v1Dir, "cpu.cfs_quota_us")); err != nil {
			return "", false, fmt.Errorf("cpu cgroup v1 at %s has no cpu.cfs_quota_us (kernel without CFS bandwidth control?): %w", v1Dir, err)
		}
		return v1Dir, false, nil
	}
	if v2Dir == "" {
		return "", false, errors.New("cpu cgroup: no cgroup v1 hierarchy with the cpu controller and no cgroup v2 mount in /proc/self/mountinfo")
	}
	ctl, err := os.ReadFile(filepath.Join(v2Dir, "cgroup.controllers"))
	if err != nil {
		return "", false, fmt.Errorf("cpu cgroup v2 at %s: %w", v2Dir, err)
	}
	if !hasItem(strings.Join(strings.Fields(string(ctl)), ","), "cpu") {
		return "", false, fmt.Errorf("cpu cgroup: the cgroup v2 group %s does not offer the cpu controller (cgroup.controllers: %q) and no cgroup v1 hierarchy has it",
			v2Dir, strings.TrimSpace(string(ctl)))
	}
	sub, err := os.ReadFile(filepath.Join(v2Dir, "cgroup.subtree_control"))
	if err != nil {
		return "", false, fmt.Errorf("cpu cgroup v2 at %s: %w", v2Dir, err)
	}
	if !hasItem(strings.Join(strings.Fields(string(sub)), ","), "cpu") {
		if err := os.WriteFile(filepath.Join(v2Dir, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			return "", false, fmt.Errorf("cpu cgroup v2: enable cpu for the groups under %s: %w", v2Dir, err)
		}
	}
	return v2Dir, true, nil
}

func hasItem(list, item string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == item {
			return true
		}
	}
	return false
}

// newCPUGroup makes group n of this process under parent with a quota of
// cpus CPUs.
func newCPUGroup(parent string, v2 bool, n int, cpus float64) (*cpuGroup, error) {
	g := &cpuGroup{dir: filepath.Join(parent, fmt.Sprintf("%s%d-%d", benchCgroupPrefix, os.Getpid(), n)), v2: v2}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cpu cgroup: %w", err)
	}
	quota := int64(cpus * cpuPeriodUs)
	var err error
	if v2 {
		err = os.WriteFile(filepath.Join(g.dir, "cpu.max"), []byte(fmt.Sprintf("%d %d", quota, cpuPeriodUs)), 0)
	} else {
		err = os.WriteFile(filepath.Join(g.dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(cpuPeriodUs)), 0)
		if err == nil {
			err = os.WriteFile(filepath.Join(g.dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0)
		}
	}
	if err != nil {
		_ = os.Remove(g.dir)
		return nil, fmt.Errorf("cpu cgroup %s: set a quota of %g CPUs: %w", g.dir, cpus, err)
	}
	return g, nil
}

// add moves process pid (all its threads) into the group.
func (g *cpuGroup) add(pid int) error {
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("cpu cgroup %s: add pid %d: %w", g.dir, pid, err)
	}
	return nil
}

// remove deletes the group once its processes are gone (the kernel lets
// a group go only when empty, which a reaped process leaves it shortly
// after).
func (g *cpuGroup) remove() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cpu cgroup: remove %s: %w", g.dir, err)
		}
		time.Sleep(20 * time.Millisecond) // poll until empty, with the deadline above
	}
}

// removeStaleCPUGroups removes the groups a crashed earlier run left
// under parent: those whose tool process is gone and that hold no
// process. A group of a running tool (another engineer's run) stays.
func removeStaleCPUGroups(parent string, log hclog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, benchCgroupPrefix) {
			continue
		}
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, benchCgroupPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || processAlive(pid) {
			continue
		}
		dir := filepath.Join(parent, name)
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(procs)) != "" {
			log.Warn("stale bench cgroup still has processes; left alone", "cgroup", dir, "procs", strings.Fields(string(procs)))
			continue
		}
		if err := os.Remove(dir); err != nil {
			log.Warn("cannot remove stale bench cgroup", "cgroup", dir, "error", err)
			continue
		}
		log.Info("removed stale bench cgroup of a run that did not clean up", "cgroup", dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
