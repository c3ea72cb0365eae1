// Package e2e runs real berth processes against real etcd on loopback and
// checks what a user and an operator would see.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testbin"
	"github.com/berth-project/berth/internal/testwait"
)

// berthBin is the binary built once for the whole package.
var berthBin string

func TestMain(m *testing.M) { testbin.Main(m.Run, "berth-e2e-bin-", &berthBin) }

// proc is one running berth process with its output captured to a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// freeAddr is a loopback address on a port no other test holds (below
// the ephemeral range; etcdtest.FreePort), for a process the test starts.
func freeAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)) }

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, args...)
}

// startProcEnv is startProc with extra environment variables (KEY=VALUE).
func startProcEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(berthBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		p.stop(t, 20*time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("---- last lines of %s ----\n%s", name, strings.Join(lines, "\n"))
		}
	})
	return p
}

// stop sends SIGTERM and waits; it kills the process past the timeout.
func (p *proc) stop(t *testing.T, timeout time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		t.Errorf("%s did not stop within %s after SIGTERM", p.name, timeout)
		return err
	}
}

// cli runs the berth CLI and returns its output.
func cli(t *testing.T, apiURL string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(berthBin, args...)
	cmd.Env = append(os.Environ(), "BERTH_API="+apiURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	testwait.Poll(t, 60*time.Second, url+" to answer", func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode < 500, resp.Status
	})
}

// waitHostsUp waits until the compute API lists n services, all up: a
// `berth dev` answers /healthz before its simulated agents have
// registered and written their alive keys, and a server created in
// between finds every host down (ComputeFilter removes them all).
func waitHostsUp(t *testing.T, apiURL string, n int) {
	t.Helper()
	cli := api.NewClient(apiURL)
	testwait.Poll(t, 60*time.Second, fmt.Sprintf("%d hosts up", n), func() (bool, string) {
		svcs, err := cli.ListServices(context.Background())
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, s := range svcs {
			if s.State == "up" {
				up++
			}
		}
		return len(svcs) == n && up == n, fmt.Sprintf("%d services, %d up", len(svcs), up)
	})
}

// leftovers lists consumers (allocations) and provider usages still in
// etcd: after every server is deleted there must be none.
func leftovers(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	cons, err := cli.Get(ctx, keys.Consumers(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range cons.Kvs {
		out = append(out, "consumer "+string(kv.Key))
	}
	provs, err := cli.Get(ctx, keys.Providers(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range provs.Kvs {
		var p etcdschema.Provider
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &p); err != nil {
			t.Fatal(err)
		}
		for rc, used := range p.Usages {
			if used != 0 {
				out = append(out, fmt.Sprintf("provider %s uses %d %s", p.Name, used, rc))
			}
		}
	}
	return out
}

// countByStatus parses `berth server list` output.
func countByStatus(out string) map[string]int {
	m := map[string]int{}
	for _, line := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 3 {
			m[f[2]]++
		}
	}
	return m
}
