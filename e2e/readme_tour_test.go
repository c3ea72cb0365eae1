package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tourNotRun lists, verbatim, the tour's commands this test does not run,
// each with why. Every other tour command must be a `./berth ...` one.
var tourNotRun = map[string]string{
	"go build -o berth ./cmd/berth": "TestMain built the binary this test runs",
	"go run ./cmd/berth dev -fail-hosts compute-1,compute-3 -build-time 2s": "a second dev with failing hosts; " +
		"retries on alternates are TestRetryOnAlternatesDisableAndExhaust's subject, not the tour's",
	"ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:2379 get --prefix /berth/hosts/ --keys-only": "etcdctl is " +
		"Debian's etcd-client, not part of Berth (TestEtcdctlRecipes runs such reads)",
	"ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:2379 get /berth/hosts/compute-1/builds/<id> --print-value-only": "as above",
	"curl -H 'X-Auth-Token: admin' -H 'OpenStack-API-Version: placement latest' http://127.0.0.1:8778/resource_providers": "" +
		"Placement's HTTP API, which placement/httpapi's gabbits and the osc tests cover",
}

// tourExit is the exit status a tour command ends with when not 0, as
// the README says.
var tourExit = map[string]int{
	"./berth server create --flavor m1.xlarge --count 60 --wait": 1, // "ends in ERROR": exit 1
}

// tourCommands returns the commands of the README's tour: the indented
// code lines between <!-- tour ... --> and <!-- /tour -->, with '\'
// continuations joined and '#' comments dropped.
func tourCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "<!-- tour")
	end := strings.Index(text, "<!-- /tour -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no <!-- tour --> ... <!-- /tour --> section")
	}
	var cmds []string
	pending := ""
	for _, line := range strings.Split(text[start:end], "\n") {
		if !strings.HasPrefix(line, "    ") {
			continue
		}
		line = strings.TrimSpace(line)
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending = strings.TrimSpace(cont)
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		cmds = append(cmds, strings.Join(strings.Fields(line), " "))
	}
	if pending != "" {
		t.Fatalf("README tour ends inside a continued command: %q", pending)
	}
	return cmds
}

// TestReadmeTour runs every command of the README's tour, in order,
// against a `berth dev` of its own (dev's default 8 hosts in 2 cells,
// every port free), so the README cannot rot: each must exit as the
// README says. <id> is the first server's id; 127.0.0.1:2379 is this
// dev's etcd.
func TestReadmeTour(t *testing.T) {
	cmds := tourCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("found %d tour commands, want the whole tour: %q", len(cmds), cmds)
	}
	apiAddr, etcdAddr := freeAddr(t), freeAddr(t)
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", etcdAddr, "-etcd-peer", freeAddr(t),
		"-api", apiAddr, "-placement", freeAddr(t), "-image", freeAddr(t), "-identity", freeAddr(t))
	apiURL := "http://" + apiAddr
	waitHTTP(t, apiURL+"/healthz")
	waitHostsUp(t, apiURL, 8)

	workDir := t.TempDir() // where `debug dump -o FILE` writes
	firstID := ""
	for _, line := range cmds {
		if why, skip := tourNotRun[line]; skip {
			t.Logf("not run: %s (%s)", line, why)
			continue
		}
		rest, ok := strings.CutPrefix(line, "./berth ")
		if !ok {
			t.Fatalf("tour command %q is neither a ./berth command nor listed in tourNotRun", line)
		}
		if strings.ContainsAny(rest, `'"$`) {
			t.Fatalf("tour command %q needs a shell; this test splits on spaces", line)
		}
		if strings.Contains(rest, "<id>") {
			if firstID == "" {
				out, err := cli(t, apiURL, "server", "list", "-o", "value", "-c", "id")
				if err != nil || strings.TrimSpace(out) == "" {
					t.Fatalf("listing ids for <id>: %v\n%s", err, out)
				}
				firstID = strings.Fields(out)[0]
			}
			rest = strings.ReplaceAll(rest, "<id>", firstID)
		}
		rest = strings.ReplaceAll(rest, "127.0.0.1:2379", etcdAddr)
		cmd := exec.Command(berthBin, strings.Fields(rest)...)
		cmd.Dir = workDir
		cmd.Env = append(os.Environ(), "BERTH_API="+apiURL)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if want := tourExit[line]; code != want {
			t.Errorf("%s: exit %d, want %d\n%s", line, code, want, out.String())
			continue
		}
		checkTourOutput(t, line, out.String(), workDir)
	}
}

// checkTourOutput checks what the README says a command prints.
func checkTourOutput(t *testing.T, line, out, workDir string) {
	t.Helper()
	switch {
	case strings.Contains(line, "-o json"):
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%s: not JSON: %v\n%s", line, err, out)
		}
	case strings.HasSuffix(line, "-o value -c id"):
		if !regexp.MustCompile(`^[0-9a-f-]{36}\n?$`).MatchString(out) {
			t.Errorf("%s: want one id, got %q", line, out)
		}
	case strings.Contains(line, "m1.xlarge --count 60"):
		if !strings.Contains(out, "ERROR") {
			t.Errorf("%s: want servers in ERROR with the scheduler's reason, got\n%s", line, out)
		}
	case strings.Contains(line, "-format json -o berth-dump.json"):
		if _, err := os.Stat(filepath.Join(workDir, "berth-dump.json")); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}
