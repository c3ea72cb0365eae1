package deploy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/testbin"
)

// berthBin is the binary built for this run: install.sh installs it and
// renders the configs with it.
var berthBin string

func TestMain(m *testing.M) { testbin.Main(m.Run, "berth-deploy-bin-", &berthBin) }

var allRoles = []string{configs.RoleEtcd, configs.RoleServer, configs.RoleConductor, configs.RoleAgent}

// labNode is one line of lab-nodes.conf: a VM of the Vagrant lab.
type labNode struct {
	Name, Address string
	Roles         []string
	Cell          string
}

// readLab parses lab-nodes.conf as the Vagrantfile does.
func readLab(t *testing.T) (nodes []labNode, vars []string) {
	t.Helper()
	f, err := os.Open("lab-nodes.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "var" && len(fields) == 2 && strings.Contains(fields[1], "="):
			vars = append(vars, fields[1])
		case fields[0] != "var" && len(fields) == 4:
			nodes = append(nodes, labNode{Name: fields[0], Address: fields[1], Roles: strings.Split(fields[2], ","), Cell: fields[3]})
		default:
			t.Fatalf("lab-nodes.conf:%d: want NAME ADDRESS ROLES CELL or var KEY=VALUE, got %q", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("lab-nodes.conf has %d machines, the lab is 3", len(nodes))
	}
	return nodes, vars
}

func etcdFlag(nodes []labNode) string {
	var parts []string
	for _, n := range nodes {
		parts = append(parts, n.Name+"="+n.Address)
	}
	return strings.Join(parts, ",")
}

// install runs the real install.sh and returns its output and exit code.
func install(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"install.sh"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run install.sh: %v", err)
	}
	return out.String(), errb.String(), code
}

func mustInstall(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := install(t, args...)
	if code != 0 {
		t.Fatalf("install.sh %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// labArgs are install.sh's arguments for lab machine n; tlsDir is the lab
// CA's directory (labCA), "" installs without TLS (--no-tls).
func labArgs(n labNode, nodes []labNode, vars []string, root, tlsDir string) []string {
	args := []string{"--binary", berthBin, "--name", n.Name, "--address", n.Address,
		"--etcd", etcdFlag(nodes), "--roles", strings.Join(n.Roles, ","), "--cell", n.Cell,
		"--root", root, "--no-start"}
	if tlsDir == "" {
		args = append(args, "--no-tls")
	} else {
		args = append(args, "--tls-dir", tlsDir)
	}
	for _, v := range vars {
		args = append(args, "--var", v)
	}
	return args
}

// TestInstallLabMachines installs each lab VM's roles into its own tree,
// as the Vagrantfile's provisioner does into /, and checks the result; then
// runs it again, and again from the deploy.env it wrote, and checks that
// nothing changed.
func TestInstallLabMachines(t *testing.T) {
	nodes, vars := readLab(t)
	ca := labCA(t)
	for _, n := range nodes {
		t.Run(n.Name, func(t *testing.T) {
			root := t.TempDir()
			mustInstall(t, labArgs(n, nodes, vars, root, ca)...)
			checkInstalled(t, root, n, nodes, vars)
			before := snapshot(t, root)

			out := mustInstall(t, labArgs(n, nodes, vars, root, ca)...)
			if strings.Contains(out, "installed /") {
				t.Errorf("second run installed files again:\n%s", out)
			}
			out = mustInstall(t, "--env-file", filepath.Join(root, "etc/berth/deploy.env"),
				"--binary", berthBin, "--root", root, "--no-start")
			if strings.Contains(out, "installed /") {
				t.Errorf("a run from deploy.env installed files again:\n%s", out)
			}
			if after := snapshot(t, root); !maps2Equal(before, after) {
				t.Errorf("re-running changed the tree:\nbefore %v\nafter  %v", before, after)
			}
			verifyUnits(t, root, n.Roles)
		})
	}
}

// snapshot maps each path under root to its mode and content hash.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("%v %x %v", info.Mode(), sha256.Sum256(b), info.ModTime().UnixNano())
		} else {
			m[rel] = info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkInstalled checks one machine's tree: the binary, a config per role
// that validates and holds what the flags said, and units that point at
// existing files.
func checkInstalled(t *testing.T, root string, n labNode, nodes []labNode, vars []string) {
	t.Helper()
	mustExec(t, root, "/usr/local/bin/berth")
	if sum(t, filepath.Join(root, "usr/local/bin/berth")) != sum(t, berthBin) {
		t.Error("/usr/local/bin/berth is not the binary given with --binary")
	}
	sysusers := readFile(t, filepath.Join(root, "usr/lib/sysusers.d/berth.conf"))
	if !strings.HasPrefix(sysusers, "u berth ") {
		t.Errorf("sysusers.d/berth.conf does not declare the user berth: %q", sysusers)
	}
	if fi, err := os.Stat(filepath.Join(root, "var/lib/berth")); err != nil || !fi.IsDir() {
		t.Errorf("data dir /var/lib/berth not created under the root: %v", err)
	}
	varMap := map[string]string{}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		varMap[k] = val
	}
	var endpoints []string
	for _, m := range nodes {
		endpoints = append(endpoints, "https://"+m.Address+":2379")
	}
	checkTLSFiles(t, root, n)

	for _, role := range allRoles {
		conf := filepath.Join(root, "etc/berth", role+".hcl")
		unit := filepath.Join(root, "etc/systemd/system/berth-"+role+".service")
		if !slices.Contains(n.Roles, role) {
			for _, p := range []string{conf, unit} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s installed, but %s is not in --roles", p, role)
				}
			}
			continue
		}

		// The binary's own validation, as the operator would run it.
		out, err := exec.Command(berthBin, "config", "validate", conf).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": ok") {
			t.Errorf("berth config validate %s: %v\n%s", conf, err, out)
		}
		cfg, err := configs.Load(conf)
		if err != nil {
			t.Errorf("load %s: %v", conf, err)
			continue
		}
		if err := cfg.Require(role); err != nil {
			t.Errorf("%s does not have what berth %s needs: %v", conf, role, err)
		}
		checkConfig(t, role, cfg, n, nodes, endpoints, varMap)
		checkUnit(t, root, role, n)
	}
	if slices.Contains(n.Roles, configs.RoleServer) {
		// The identity admin logs in with the password install.sh made
		// (root only), whose hash server.hcl holds.
		pwPath := filepath.Join(root, "etc/berth/identity-admin-password")
		if fi, err := os.Stat(pwPath); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("server: admin password file: %v %v, want mode 0600", fi, err)
		}
		cfg, err := configs.Load(filepath.Join(root, "etc/berth/server.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(cfg.Identity.Users[0].PasswordHash), []byte(readFile(t, pwPath))); err != nil {
			t.Errorf("server: the rendered admin hash is not of the password made: %v", err)
		}
	}

	profile := readFile(t, filepath.Join(root, "etc/profile.d/berth.sh"))
	for _, want := range []string{"ETCDCTL_ENDPOINTS=" + strings.Join(endpoints, ","), "ETCDCTL_CERT=/etc/berth/tls/" + n.Name + ".pem",
		"ETCDCTL_CACERT=/etc/berth/tls/ca.pem", "OS_CACERT=/etc/berth/tls/ca.pem"} {
		if strings.Contains(profile, want) {
			continue
		}
		t.Errorf("profile.d/berth.sh lacks %s:\n%s", want, profile)
	}
	wantAPI := slices.Contains(n.Roles, configs.RoleServer)
	if got := strings.Contains(profile, "BERTH_API=https://"+n.Address+":8774"); got != wantAPI {
		t.Errorf("profile.d/berth.sh sets BERTH_API to this machine: %v, want %v:\n%s", got, wantAPI, profile)
	}
}

// checkConfig checks that a rendered config says what the flags said.
func checkConfig(t *testing.T, role string, cfg *configs.Config, n labNode, nodes []labNode,
	endpoints []string, vars map[string]string) {
	t.Helper()
	if role != configs.RoleEtcd && !slices.Equal(cfg.Etcd.Endpoints, endpoints) {
		t.Errorf("%s: etcd endpoints %v, want every member %v", role, cfg.Etcd.Endpoints, endpoints)
	}
	underData := func(what, p string) {
		if !strings.HasPrefix(p, "/var/lib/berth/") {
			t.Errorf("%s: %s %q is not under the data dir /var/lib/berth, which install.sh makes the berth user's", role, what, p)
		}
	}
	switch role {
	case configs.RoleEtcd:
		m := cfg.Etcd.Embedded
		if m == nil {
			t.Fatalf("etcd: no embedded member")
		}
		if m.Name != n.Name || m.ClientURL != "https://"+n.Address+":2379" || m.PeerURL != "https://"+n.Address+":2380" {
			t.Errorf("etcd: member %s client %s peer %s, want %s on %s", m.Name, m.ClientURL, m.PeerURL, n.Name, n.Address)
		}
		for _, o := range nodes {
			if peer := o.Name + "=https://" + o.Address + ":2380"; !strings.Contains(m.InitialCluster, peer) {
				t.Errorf("etcd: initial_cluster %q lacks %s", m.InitialCluster, peer)
			}
		}
		underData("data_dir", m.DataDir)
	case configs.RoleServer:
		if cfg.API == nil || cfg.Placement == nil || cfg.Scheduler == nil || cfg.Superconductor == nil {
			t.Fatalf("server: every server role should be enabled: %+v", cfg)
		}
		if cfg.API.Bind != n.Address+":8774" || cfg.Placement.Bind != n.Address+":8778" {
			t.Errorf("server: api on %s, placement on %s, want %s:8774 and :8778", cfg.API.Bind, cfg.Placement.Bind, n.Address)
		}
		if !strings.Contains(cfg.Scheduler.AdvertiseURL, n.Address) {
			t.Errorf("server: scheduler advertises %s, not this machine's address %s", cfg.Scheduler.AdvertiseURL, n.Address)
		}
		// Never noauth: identity tokens (checkInstalled checks the
		// admin's password).
		if cfg.API.Auth != configs.AuthKeystone || cfg.Placement.Auth != configs.AuthKeystone || cfg.Identity == nil {
			t.Fatalf("server: api auth %q, placement auth %q, identity %v; want keystone with an identity block", cfg.API.Auth, cfg.Placement.Auth, cfg.Identity)
		}

	case configs.RoleConductor:
		if cfg.Conductor.Cell != n.Cell {
			t.Errorf("conductor: cell %s, want %s", cfg.Conductor.Cell, n.Cell)
		}
	case configs.RoleAgent:
		a := cfg.Agent
		if a.Host != n.Name || a.Cell != n.Cell {
			t.Errorf("agent: host %s cell %s, want %s in %s", a.Host, a.Cell, n.Name, n.Cell)
		}
		if a.Driver != configs.DriverProcess || a.Process.Command != "sleep infinity" {
			t.Errorf("agent: driver %s command %q, the lab runs process / sleep infinity", a.Driver, a.Process.Command)
		}
		if v, ok := vars["vcpus"]; ok && fmt.Sprint(a.Inventory.VCPUs) != v {
			t.Errorf("agent: vcpus %d, lab-nodes.conf sets %s", a.Inventory.VCPUs, v)
		}
		if v, ok := vars["memory_mb"]; ok && fmt.Sprint(a.Inventory.MemoryMB) != v {
			t.Errorf("agent: memory_mb %d, lab-nodes.conf sets %s", a.Inventory.MemoryMB, v)
		}
		underData("process.state_dir", a.Process.StateDir)
	}
}

// unitFile is a parsed systemd unit: every Key=value, by section.Key.
type unitFile map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	for _, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not Key=value: %q", path, line)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

func (u unitFile) one(key string) string {
	if v := u[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func checkUnit(t *testing.T, root, role string, n labNode) {
	t.Helper()
	path := filepath.Join(root, "etc/systemd/system/berth-"+role+".service")
	u := parseUnit(t, path)
	exec := strings.Fields(u.one("Service.ExecStart"))
	if len(exec) != 5 || exec[1] != "run" || exec[2] != role || exec[3] != "-config" {
		t.Fatalf("%s: ExecStart %q, want BINARY run %s -config FILE", path, u.one("Service.ExecStart"), role)
	}
	mustExec(t, root, exec[0])
	if exec[4] != "/etc/berth/"+role+".hcl" {
		t.Errorf("%s: runs with %s, install.sh writes /etc/berth/%s.hcl", path, exec[4], role)
	}
	if _, err := os.Stat(filepath.Join(root, exec[4])); err != nil {
		t.Errorf("%s: its config: %v", path, err)
	}
	if u.one("Service.User") != "berth" || u.one("Service.Restart") != "on-failure" {
		t.Errorf("%s: User=%s Restart=%s, want berth and on-failure", path, u.one("Service.User"), u.one("Service.Restart"))
	}
	// berth stops its roles within 10s (HTTP) + 30s (roles): systemd must
	// not SIGKILL it first.
	if d, err := time.ParseDuration(u.one("Service.TimeoutStopSec")); err != nil || d <= 40*time.Second {
		t.Errorf("%s: TimeoutStopSec=%s, want more than the 40s a graceful stop may take", path, u.one("Service.TimeoutStopSec"))
	}
	// Process-driver instances are the agent's children, in its cgroup:
	// only KillMode=process lets them outlive an agent restart.
	killMode := u.one("Service.KillMode")
	if role == configs.RoleAgent && killMode != "process" {
		t.Errorf("%s: KillMode=%q, want process", path, killMode)
	}
	if role != configs.RoleAgent && killMode != "" {
		t.Errorf("%s: KillMode=%q; only the agent has children that must survive it", path, killMode)
	}

	dropIn := filepath.Join(root, "etc/systemd/system/berth-"+role+".service.d/10-local-etcd.conf")
	_, err := os.Stat(dropIn)
	localEtcd := role != configs.RoleEtcd && slices.Contains(n.Roles, configs.RoleEtcd)
	if localEtcd != (err == nil) {
		t.Errorf("%s: drop-in present %v, want %v (etcd is local: %v)", dropIn, err == nil, localEtcd, localEtcd)
	}
	if localEtcd {
		if d := parseUnit(t, dropIn); d.one("Unit.Wants") != "berth-etcd.service" {
			t.Errorf("%s: Wants=%q, want berth-etcd.service", dropIn, d.one("Unit.Wants"))
		}
		if !strings.Contains(u.one("Unit.After"), "berth-etcd.service") {
			t.Errorf("%s: After=%q does not order it after the local etcd member", path, u.one("Unit.After"))
		}
	}
}

// verifyUnits runs systemd-analyze verify on the installed units inside the
// tree (with the host's own units copied in for the targets they name): it
// catches misspelled keys and bad values, and binaries that do not exist.
func verifyUnits(t *testing.T, root string, roles []string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: units not verified")
		return
	}
	const hostUnits = "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(hostUnits, "multi-user.target")); err != nil {
		t.Logf("no %s/multi-user.target here: units not verified", hostUnits)
		return
	}
	copyHostUnits(t, root)
	args := []string{"verify", "--root=" + root}
	for _, r := range roles {
		args = append(args, "berth-"+r+".service")
	}
	out, err := exec.Command(sa, args...).CombinedOutput()
	// verify exits 0 on some problems (an unknown key is "ignoring"): any
	// output is a failure.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// copyHostUnits copies the host's /usr/lib/systemd/system into root, with
// its alias symlinks (cp -a: os.CopyFS refuses symlinks).
func copyHostUnits(t *testing.T, root string) {
	t.Helper()
	dst := filepath.Join(root, "usr/lib/systemd")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the host's units into the tree: %v\n%s", err, out)
	}
}

// TestSystemdAnalyzeCatchesMistakes makes sure verifyUnits can fail: a unit
// with a misspelled KillMode and a missing binary must be reported.
func TestSystemdAnalyzeCatchesMistakes(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not found")
	}
	if _, err := os.Stat("/usr/lib/systemd/system/multi-user.target"); err != nil {
		t.Skip("no host units to verify against")
	}
	root := t.TempDir()
	unit := strings.Replace(readFile(t, "systemd/berth-agent.service"), "\nKillMode=process\n", "\nKillMode=procss\n", 1)
	if err := os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/berth-agent.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	copyHostUnits(t, root)
	out, _ := exec.Command("systemd-analyze", "verify", "--root="+root, "berth-agent.service").CombinedOutput()
	for _, want := range []string{"procss", "/usr/local/bin/berth"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("systemd-analyze verify did not report %q:\n%s", want, out)
		}
	}
}

// TestInstallRejectsBadInput: every mistake is refused with a message
// naming it, before anything is installed.
func TestInstallRejectsBadInput(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "bad.env")
	if err := os.WriteFile(envFile, []byte("BERTH_NAME=n1\nBERTH_COLOR=blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := []string{"--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
		"--roles", "etcd,agent", "--cell", "cell1", "--no-start", "--no-tls"}
	noCA := t.TempDir()
	// with returns ok with flag set to value (or removed when value is "").
	with := func(flag, value string) []string {
		var out []string
		for i := 0; i < len(ok); i++ {
			if ok[i] == flag {
				if value != "" {
					out = append(out, flag, value)
				}
				i++
				continue
			}
			out = append(out, ok[i])
		}
		return out
	}
	cases := []struct {
		desc string
		args []string
		code int
		want string
	}{
		{"no arguments", nil, 2, "--binary is required"},
		{"unknown flag", append(with("", ""), "--colour", "blue"), 2, "unknown argument '--colour'"},
		{"flag without value", append(with("", ""), "--cell"), 2, "--cell needs a value"},
		{"missing binary file", with("--binary", "/nonexistent/berth"), 2, "--binary /nonexistent/berth: no such file"},
		{"missing name", with("--name", ""), 2, "--name is required"},
		{"bad name", with("--name", "n 1"), 2, "--name 'n 1'"},
		{"bad address", with("--address", "10.0.0.300"), 2, "--address '10.0.0.300': not an IP address"},
		{"etcd member without address", with("--etcd", "n1"), 2, "--etcd: 'n1' is not NAME=IP"},
		{"etcd member twice", with("--etcd", "n1=10.0.0.1,n1=10.0.0.2"), 2, "member 'n1' is listed twice"},
		{"etcd role, machine not a member", with("--etcd", "n2=10.0.0.2"), 2, "--etcd does not list this machine ('n1')"},
		{"etcd role, other address", with("--etcd", "n1=10.0.0.9"), 2, "--etcd lists n1=10.0.0.9 but --address is 10.0.0.1"},
		{"unknown role", with("--roles", "agent,scheduler"), 2, "unknown role 'scheduler'"},
		{"role twice", with("--roles", "agent,agent"), 2, "'agent' is listed twice"},
		{"agent without cell", with("--cell", ""), 2, "--cell is required"},
		{"relative data dir", append(with("", ""), "--data-dir", "var/lib"), 2, "must be an absolute path"},
		{"var without value", append(with("", ""), "--var", "vcpus"), 2, "--var 'vcpus': want KEY=VALUE"},
		{"var without name", append(with("", ""), "--var", "=4"), 2, "--var '=4': want KEY=VALUE, KEY a template variable name"},
		{"var name with a blank", append(with("", ""), "--var", "v cpus=4"), 2, "--var 'v cpus=4'"},
		{"env file with unknown key", append(with("", ""), "--env-file", envFile), 2, "bad.env:2: unknown key 'BERTH_COLOR'"},
		{"env file missing", append(with("", ""), "--env-file", "/nonexistent.env"), 2, "no such file"},
		{"no certificates", with("--no-tls", ""), 2, "deployments serve TLS: give --tls-dir DIR"},
		{"tls dir and no-tls", append(with("", ""), "--tls-dir", noCA), 2, "--tls-dir and --no-tls: choose one"},
		{"tls dir without a CA", append(with("--no-tls", ""), "--tls-dir", noCA), 2, "no ca.pem (make the lab CA with: berth tls ca"},
		// Caught by berth config render, after the binary is installed but
		// before any config or unit is.
		{"unknown template variable", append(with("", ""), "--var", "colour=blue"), 1, `unknown variable "colour"`},
		{"ill-typed template variable", append(with("", ""), "--var", "vcpus=many"), 1, `vcpus="many"`},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			root := t.TempDir()
			args := c.args
			if args != nil {
				args = append([]string{"--root", root}, args...)
			}
			out, errs, code := install(t, args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, want %d; stderr should contain %q:\n%s%s", code, c.code, c.want, errs, out)
			}
			for _, p := range []string{"etc/berth/etcd.hcl", "etc/berth/agent.hcl", "etc/systemd/system/berth-agent.service"} {
				if _, err := os.Stat(filepath.Join(root, p)); err == nil {
					t.Errorf("%s installed although the input was refused", p)
				}
			}
		})
	}
}

// TestInstallRoleChanges: dropping etcd from a machine's roles removes the
// drop-ins that made its other units want the local member, and roles no
// longer listed are left installed (an operator decides to remove them).
func TestInstallRoleChanges(t *testing.T) {
	root := t.TempDir()
	args := func(roles string) []string {
		return []string{"--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
			"--roles", roles, "--cell", "cell1", "--root", root, "--no-start", "--no-tls"}
	}
	mustInstall(t, args("etcd,agent,conductor")...)
	dropIn := filepath.Join(root, "etc/systemd/system/berth-agent.service.d/10-local-etcd.conf")
	if _, err := os.Stat(dropIn); err != nil {
		t.Fatalf("agent beside etcd: %v", err)
	}
	out := mustInstall(t, args("agent")...)
	if _, err := os.Stat(dropIn); err == nil {
		t.Error("the agent's local-etcd drop-in stayed after etcd left --roles")
	}
	for _, r := range []string{"etcd", "conductor"} {
		if !strings.Contains(out, "berth-"+r+".service is installed but not in --roles") {
			t.Errorf("no note about the %s unit left installed:\n%s", r, out)
		}
		if _, err := os.Stat(filepath.Join(root, "etc/systemd/system/berth-"+r+".service")); err != nil {
			t.Errorf("berth-%s.service removed: %v", r, err)
		}
	}
}

// TestInstallEnvFileKeepsSettings: deploy.env records every setting, a
// value with blanks included, and a later run from it (an upgrade with a
// new --binary) renders the same configs; a --var on that run's command
// line wins over the file's.
func TestInstallEnvFileKeepsSettings(t *testing.T) {
	root := t.TempDir()
	mustInstall(t, "--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
		"--roles", "agent", "--cell", "cell1", "--root", root, "--no-start", "--no-tls",
		"--var", "process_command=sleep 1000", "--var", "vcpus=8")
	env := filepath.Join(root, "etc/berth/deploy.env")
	conf := filepath.Join(root, "etc/berth/agent.hcl")
	out := mustInstall(t, "--env-file", env, "--binary", berthBin, "--root", root, "--no-start")
	if strings.Contains(out, "installed /") {
		t.Errorf("a run from deploy.env changed files:\n%s", out)
	}
	mustInstall(t, "--env-file", env, "--binary", berthBin, "--root", root, "--no-start", "--var", "vcpus=4")
	cfg, err := configs.Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Process.Command != "sleep 1000" || cfg.Agent.Inventory.VCPUs != 4 {
		t.Errorf("agent command %q vcpus %d, want the file's \"sleep 1000\" and the command line's 4",
			cfg.Agent.Process.Command, cfg.Agent.Inventory.VCPUs)
	}
}

// TestInstallAdminPassword: --admin-password-file sets the identity
// admin's password; the same file again changes nothing, another
// password re-hashes, and a run without the flag keeps the last one.
func TestInstallAdminPassword(t *testing.T) {
	root, dir, ca := t.TempDir(), t.TempDir(), labCA(t)
	pw := filepath.Join(dir, "pw")
	install := func(extra ...string) string {
		args := append([]string{"--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
			"--roles", "server", "--root", root, "--no-start", "--tls-dir", ca}, extra...)
		return mustInstall(t, args...)
	}
	hashIs := func(password string) bool {
		t.Helper()
		cfg, err := configs.Load(filepath.Join(root, "etc/berth/server.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		return bcrypt.CompareHashAndPassword([]byte(cfg.Identity.Users[0].PasswordHash), []byte(password)) == nil
	}
	if err := os.WriteFile(pw, []byte("first-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	install("--admin-password-file", pw)
	if !hashIs("first-secret") {
		t.Fatal("server.hcl's admin hash is not of the file's password")
	}
	if _, err := os.Stat(filepath.Join(root, "etc/berth/identity-admin-password")); err == nil {
		t.Error("a password was made although one was given")
	}
	if out := install("--admin-password-file", pw); strings.Contains(out, "installed /") {
		t.Errorf("the same password again changed files:\n%s", out)
	}
	if out := install(); strings.Contains(out, "installed /") || !hashIs("first-secret") {
		t.Errorf("a run without the flag changed the password or files:\n%s", out)
	}
	if err := os.WriteFile(pw, []byte("second-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	install("--admin-password-file", pw)
	if !hashIs("second-secret") {
		t.Error("a new password was not hashed into server.hcl")
	}
}

// TestInstallEnablesUnderRoot: without --no-start, a --root install
// enables the units in the tree (for images) and starts nothing.
func TestInstallEnablesUnderRoot(t *testing.T) {
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl not found")
	}
	root := t.TempDir()
	out := mustInstall(t, "--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
		"--roles", "etcd,server", "--root", root, "--no-tls")
	for _, r := range []string{"etcd", "server"} {
		link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants/berth-"+r+".service")
		if target, err := os.Readlink(link); err != nil || target != "/etc/systemd/system/berth-"+r+".service" {
			t.Errorf("%s: %q, %v; want a link to the unit", link, target, err)
		}
	}
	if !strings.Contains(out, "not started") {
		t.Errorf("install.sh did not say it started nothing:\n%s", out)
	}
}

// TestShellcheck lints every script under deploy/ and scripts/ (Debian:
// shellcheck).
func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (Debian package shellcheck; .ci/run installs it)")
	}
	scripts, err := filepath.Glob("*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	more, err := filepath.Glob("../scripts/*.sh")
	if err != nil || len(more) == 0 {
		t.Fatalf("no scripts found under ../scripts: %v", err)
	}
	scripts = append(scripts, more...)
	out, err := exec.Command(sc, append([]string{"--shell=bash", "--severity=style"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck %s: %v\n%s", strings.Join(scripts, " "), err, out)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sum(t *testing.T, p string) [32]byte {
	t.Helper()
	return sha256.Sum256([]byte(readFile(t, p)))
}

// mustExec checks that path, inside root, is an executable file.
func mustExec(t *testing.T, root, path string) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(root, path))
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s is not an executable file (%v)", path, fi.Mode())
	}
}

// TestInstallIntoRootFilesystem runs install.sh as the lab's provisioner
// does, without --root, but inside a mount namespace whose /etc, /usr and
// /var are overlays on a tmpfs: the system user is really created, and the
// ownership install.sh sets is really applied, and the host is untouched.
// It needs root and overlayfs; without them it is skipped, saying why.
func TestInstallIntoRootFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to create the berth user and chown, inside a mount namespace)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare not found (util-linux)")
	}
	_, err = os.Stat("/etc/berth")
	hadEtcBerth := err == nil
	script := `set -e
work=$1; shift
mount -t tmpfs tmpfs "$work"
for d in etc usr var; do
    mkdir -p "$work/$d-up" "$work/$d-work"
    mount -t overlay overlay -o "lowerdir=/$d,upperdir=$work/$d-up,workdir=$work/$d-work" "/$d" || exit 99
done
bash install.sh "$@"
bash install.sh "$@" >"$work/second.out"
echo "second: $(grep -c 'installed /' "$work/second.out" || true)"
echo "user: $(getent passwd berth)"
stat -c 'stat: %U:%G %a %n' /var/lib/berth /etc/berth /etc/berth/agent.hcl /etc/berth/etcd.hcl /usr/local/bin/berth /etc/systemd/system/berth-agent.service /etc/berth/tls/n1-key.pem
/usr/local/bin/berth config validate /etc/berth/agent.hcl /etc/berth/etcd.hcl
`
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "bash", "-c", script, "ns", t.TempDir(),
		"--binary", berthBin, "--name", "n1", "--address", "10.0.0.1", "--etcd", "n1=10.0.0.1",
		"--roles", "etcd,agent", "--cell", "cell1", "--no-start", "--tls-dir", labCA(t))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 99 {
		t.Skipf("overlayfs mounts not possible here:\n%s", out)
	}
	if err != nil {
		if strings.Contains(string(out), "unshare failed") {
			t.Skipf("no mount namespace here: %s", out)
		}
		t.Fatalf("install.sh into / in a mount namespace: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{
		"created system user berth",
		"second: 0",
		"user: berth:",
		":/var/lib/berth:/usr/sbin/nologin",
		"stat: berth:berth 750 /var/lib/berth",
		"stat: root:berth 750 /etc/berth",
		"stat: root:berth 640 /etc/berth/agent.hcl",
		"stat: root:berth 640 /etc/berth/etcd.hcl",
		"stat: root:root 755 /usr/local/bin/berth",
		"stat: root:root 644 /etc/systemd/system/berth-agent.service",
		"stat: root:berth 640 /etc/berth/tls/n1-key.pem",
		"/etc/berth/agent.hcl: ok",
		"/etc/berth/etcd.hcl: ok",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if _, err := os.Stat("/etc/berth"); err == nil && !hadEtcBerth {
		t.Error("/etc/berth exists on the host: the mount namespace leaked")
	}
}

// labCA is a lab CA made as an operator makes one (berth tls ca), for
// install.sh's --tls-dir: it issues each machine's certificate itself.
func labCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(berthBin, "tls", "ca", "-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("berth tls ca: %v\n%s", err, out)
	}
	return dir
}

// checkTLSFiles: the machine's certificate, for its name and address,
// its key (berth group only) and the CA are in /etc/berth/tls, and the
// CA's key is not.
func checkTLSFiles(t *testing.T, root string, n labNode) {
	t.Helper()
	dir := filepath.Join(root, "etc/berth/tls")
	for f, mode := range map[string]os.FileMode{"ca.pem": 0o644, n.Name + ".pem": 0o644, n.Name + "-key.pem": 0o640} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %o", f, fi, err, mode)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err == nil {
		t.Error("the CA's key was installed on the machine")
	}
	blk, _ := pem.Decode([]byte(readFile(t, filepath.Join(dir, n.Name+".pem"))))
	if blk == nil {
		t.Fatalf("%s.pem holds no PEM", n.Name)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(readFile(t, filepath.Join(dir, "ca.pem"))))
	for _, name := range []string{n.Address, n.Name, "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("%s.pem does not verify for %s: %v", n.Name, name, err)
		}
	}
}
