package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/freeport"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/internal/testwait"
)

// cliStack is an in-process `berth dev` (every role, three simulated
// hosts in two cells, the dev identity with its admin login and a demo
// member) for the CLI to drive over real HTTP.
type cliStack struct {
	compute, identity, image string
}

// demoUser is a member of project demo, beside dev's admin.
const (
	demoUser     = "demo"
	demoPassword = "demo-pw"
)

func startCLIStack(t *testing.T, auth string) *cliStack {
	t.Helper()
	return startCLIStackBuilding(t, auth, 0)
}

// startCLIStackBuilding is startCLIStack whose builds take buildTime.
func startCLIStackBuilding(t *testing.T, auth string, buildTime time.Duration) *cliStack {
	t.Helper()
	ports := []int{freeport.Take(t), freeport.Take(t), freeport.Take(t)}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.Image = configs.DefaultImage()
	cfg.API.Bind, cfg.Image.Bind = addr(0), addr(1)
	cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0"
	cfg.API.Auth = auth
	if _, err := devIdentity(cfg, addr(2)); err != nil {
		t.Fatal(err)
	}
	hash, err := identity.HashPassword(demoPassword)
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.Identity
	id.Users = append(id.Users, configs.IdentityUser{Name: demoUser, PasswordHash: hash})
	id.Projects = append(id.Projects, configs.IdentityProject{Name: "demo"})
	id.Assignments = append(id.Assignments, configs.RoleAssignment{User: demoUser, Project: "demo", Role: "member"})

	s := stack.New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := stack.Dev(stack.DevOptions{Hosts: 3, Cells: 2, BuildTime: buildTime, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	st := &cliStack{compute: "http://" + addr(0), image: "http://" + addr(1), identity: "http://" + addr(2) + "/v3"}
	// Through the CLI itself, as the dev admin.
	cleanEnv(t, "OS_AUTH_URL", st.identity, "OS_USERNAME", configs.DevAdminUser, "OS_PASSWORD", configs.DevAdminPassword,
		"OS_PROJECT_NAME", configs.DevAdminProject, "OS_USER_DOMAIN_NAME", "Default", "OS_PROJECT_DOMAIN_NAME", "Default")
	testwait.Poll(t, 30*time.Second, "three hypervisors up", func() (bool, string) {
		code, out, errs := berth("hypervisor", "list", "-o", "value", "-c", "state")
		return code == 0 && out == "up\nup\nup\n", out + errs
	})
	return st
}

// osEnv are the variables the CLI reads; every test sets them all, so the
// developer's own never leak in.
var osEnv = []string{"OS_CLOUD", "OS_CLIENT_CONFIG_FILE", "OS_AUTH_URL", "OS_AUTH_TYPE", "OS_USERNAME", "OS_PASSWORD",
	"OS_PROJECT_NAME", "OS_PROJECT_ID", "OS_USER_DOMAIN_NAME", "OS_PROJECT_DOMAIN_NAME", "OS_DOMAIN_NAME",
	"OS_REGION_NAME", "OS_INTERFACE", "OS_ENDPOINT", "OS_TOKEN", "OS_SYSTEM_SCOPE", "BERTH_API"}

// cleanEnv empties every variable the CLI reads, then sets kv.
func cleanEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, k := range osEnv {
		t.Setenv(k, "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// berth runs the CLI in this process.
func berth(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runIO(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// mustBerth runs the CLI and fails the test unless it exits 0.
func mustBerth(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := berth(args...)
	if code != 0 {
		t.Fatalf("berth %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
