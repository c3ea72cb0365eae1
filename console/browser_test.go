package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/internal/testwait"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write each page's screenshot to docs/console/*.png")

// chromiumPath finds Debian's chromium. Without it the browser test
// skips on a developer's machine and fails in CI (CI=true), whose
// .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; .ci/run must install Debian's chromium for the console's browser test")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): skipping the console's browser test")
	return ""
}

// startStack is `berth dev`'s roles with the compute API in keystone
// mode: four simulated hosts over two cells (compute-1 and -3 in cell1,
// -2 and -4 in cell2), compute-3's builds failing.
func startStack(t *testing.T) *stack.Stack {
	t.Helper()
	hash, err := identity.HashPassword("admin-pw")
	if err != nil {
		t.Fatal(err)
	}
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.API.Auth = configs.AuthKeystone
	// The overview's counts by status are the leader's: count every second.
	cfg.Scheduler.LeaderInterval = time.Second
	cfg.Identity = &configs.Identity{
		Bind:        "127.0.0.1:0", // the Nova API calls log in here
		Users:       []configs.IdentityUser{{Name: "admin", PasswordHash: hash}},
		Projects:    []configs.IdentityProject{{Name: "admin"}},
		Assignments: []configs.RoleAssignment{{User: "admin", Project: "admin", Role: identity.RoleAdmin}},
	}
	s := stack.New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := stack.Dev(stack.DevOptions{Hosts: 4, Cells: 2, FailHosts: map[string]bool{"compute-3": true}, DataDir: t.TempDir()})
	if err := start(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	return s
}

// TestConsoleInABrowser drives headless Chromium through the console as
// an operator would: log in, read the hosts and their capacity bars,
// disable a host with a reason, watch a new server appear without a
// reload, open a failed server's fault and attempts, follow a resize on
// the migrations page to its confirm, and drain a host and watch its
// progress.
func TestConsoleInABrowser(t *testing.T) {
	chromium := chromiumPath(t)
	s := startStack(t)
	base := s.Endpoint("compute API")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// /v1 checks tokens as the Nova API does: the admin's, from the
	// stack's identity API.
	c := api.NewClient(base)
	c.Token = novaLogin(t, ctx, s.Endpoint("identity"))
	testwait.Poll(t, 30*time.Second, "four hosts up", func() (bool, string) {
		hs, err := c.ListHosts(ctx)
		up := 0
		for _, h := range hs {
			if h.State == "up" {
				up++
			}
		}
		return err == nil && up == 4, "hosts up: " + strings.Repeat("*", up)
	})
	failed := createAndWait(t, ctx, c, "doomed", "compute-3", "ERROR")

	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	defer allocCancel()
	bctx, bcancel := chromedp.NewContext(allocCtx)
	defer bcancel()
	// The first Run starts the browser, with no deadline of its own.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(bctx, 45*time.Second)
		defer cancel()
		if err := chromedp.Do(step, actions...); err != nil {
			page, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
			t.Fatalf("%s: %v\npage:\n%s", what, err, page)
		}
	}
	value := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	// seen waits for text in the element sel, as a person reads it
	// (innerText), riding out a navigation the previous step started.
	seen := func(sel, text string) chromedp.Action[chromedp.Void] {
		expr := `(function(){var n=document.querySelector(` + quote(sel) + `);return !!n && n.innerText.includes(` + quote(text) + `);})()`
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var last error
			err := testwait.Wait(ctx, 30*time.Second, func() (bool, string) {
				ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
				if err != nil {
					last = err
				}
				return err == nil && ok, fmt.Sprintf("%q in %s (last error: %v)", text, sel, last)
			})
			return err
		})
	}
	// Logged out, the console sends a person to its login form.
	run("open the login page", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`form.login`)))
	screenshot(t, bctx, "login")
	run("log in",
		chromedp.SendKeys(chromedp.CSS(`input[name=user]`), "admin"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "admin-pw"),
		chromedp.Submit(chromedp.CSS(`form.login`)),
		seen("header", "admin on project admin"))

	// The overview: every host in its cell, up, with a bar per class.
	run("hosts with capacity bars",
		seen("#cells", "compute-1"), seen("#cells", "compute-2"), seen("#cells", "compute-3"),
		seen("#cells", "Cell cell1"), seen("#cells", "Cell cell2"))
	if bars := value(`document.querySelectorAll('#cells tr.host meter').length`); bars != float64(12) {
		t.Errorf("%d capacity bars on the hosts, want 3 classes x 4 hosts", bars)
	}

	// Disable a host with the form; its page and the overview say so.
	run("disable compute-2",
		chromedp.Navigate(base+"/console/hosts/compute-2"),
		chromedp.SendKeys(chromedp.CSS(`input[name=reason]`), "rack swap <today>"),
		chromedp.Click(chromedp.CSS(`form.hostform button`)),
		seen("#hoststate", "disabled"), seen("#hoststate", "rack swap <today>"),
		seen("form.hostform", "Enable compute-2"))
	run("the overview shows it disabled",
		chromedp.Navigate(base+"/console/"), seen("#host-compute-2", "disabled: rack swap <today>"))

	// A server created through the API appears on the open list, live.
	run("open the servers list",
		chromedp.Navigate(base+"/console/servers"), seen("#live.on", "live"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](`window.samePage = true`)(ctx, tg)
			return err
		}))
	live := createAndWait(t, ctx, c, "live-1", "compute-1", "ACTIVE")
	run("see it without a reload", seen("#serverlist", "live-1"), seen("#server-"+live, "ACTIVE"))
	if value(`window.samePage === true`) != true {
		t.Error("the servers list was reloaded; want the new server swapped in live")
	}
	screenshot(t, bctx, "servers")

	// The failed server: its fault and its attempt on compute-3.
	run("open the failed server",
		chromedp.Navigate(base+"/console/servers/"+failed),
		seen("#serverdetail", "ERROR"), seen(".faultbox", "Fault"), seen("table.attempts", "compute-3"))
	fault, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`.faultmsg`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fault, "500") && !strings.Contains(fault, "No valid host") {
		t.Errorf("fault %q, want Nova's code and message", fault)
	}
	screenshot(t, bctx, "server")

	// Back on the overview: compute-2 disabled with its reason, live-1's
	// allocation in compute-1's bars and in cell1's sums, and the two
	// servers counted (by status, as the leader last counted them).
	run("the overview after all that",
		chromedp.Navigate(base+"/console/"), seen("#host-compute-2", "rack swap <today>"),
		seen("#host-compute-1", "1 / 64"), seen("#counts", "2 servers"), seen("#counts", "1 ACTIVE"),
		seen("#counts", "1 ERROR"), seen("#counts", "as the leader counted them"))
	screenshot(t, bctx, "overview")

	// A resize through the Nova API: with compute-2 enabled again, db-1
	// moves from compute-4 to compute-2, the other host of its cell. The
	// server page shows the move, the migrations page shows it finished
	// (the server in VERIFY_RESIZE), and the confirm reaches the open
	// page live.
	run("enable compute-2",
		chromedp.Navigate(base+"/console/hosts/compute-2"),
		chromedp.Click(chromedp.CSS(`form.hostform button`)),
		seen("#hoststate", "enabled"))
	mover := createAndWait(t, ctx, c, "db-1", "compute-4", "ACTIVE")
	token := novaLogin(t, ctx, s.Endpoint("identity"))
	nova(t, ctx, base, token, mover, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, 202)
	testwait.Poll(t, time.Minute, "db-1 in VERIFY_RESIZE", func() (bool, string) {
		v, err := c.GetServer(ctx, mover)
		if err != nil {
			return false, err.Error()
		}
		if v.Status == "ERROR" {
			t.Fatalf("the resize of db-1 failed: %+v", v.Fault)
		}
		return v.Status == "VERIFY_RESIZE", v.Status
	})
	run("the server page shows the move",
		chromedp.Navigate(base+"/console/servers/"+mover),
		seen("#serverdetail", "VERIFY_RESIZE"), seen(".migrationbox", "Moving now: resize"),
		seen(".migrationbox", "m1.tiny → m1.small"), seen(".migrationbox", "compute-4 → compute-2"))
	run("the migrations page shows it finished, waiting for a confirm",
		chromedp.Navigate(base+"/console/migrations"), seen("#live.on", "live"),
		seen("#migrationlist", "db-1"), seen("#migrationlist", "resize"), seen("#migrationlist", "finished"),
		seen("#migrationlist", "compute-4 → compute-2"), seen("#migrationlist", "m1.tiny → m1.small"))
	screenshot(t, bctx, "migrations")
	nova(t, ctx, base, token, mover, map[string]any{"confirmResize": nil}, 204)
	run("the confirm appears without a reload", seen("#migrationlist", "confirmed"))

	// Drain compute-2 from its page: the leader moves db-1 to compute-4,
	// the other host of cell2, and confirms it; the page follows the
	// drain to its end without a reload, and the host stays disabled.
	run("drain compute-2",
		chromedp.Navigate(base+"/console/hosts/compute-2"), seen("#hostdrain", "Not drained."),
		chromedp.SetValue(chromedp.CSS(`form.drainform input[name=parallel]`), "2"),
		chromedp.Click(chromedp.CSS(`form.drainform button`)),
		seen("#hoststate", "draining"), seen("#hostdrain", "cold migrations, 2 at once"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](`window.samePage = true`)(ctx, tg)
			return err
		}),
		seen("#hostdrain", "complete"), seen("#hostdrain", "1 moved, 0 moving, 0 waiting, 0 failed"),
		seen("table.drainservers", "db-1"), seen("table.drainservers", "compute-4"),
		seen("form.drainform", "Drain compute-2"))
	if value(`window.samePage === true`) != true {
		t.Error("the host page was reloaded while draining; want the drain's progress swapped in live")
	}
	screenshot(t, bctx, "host")
	if v, err := c.GetServer(ctx, mover); err != nil || v.Status != "ACTIVE" || v.Host != "compute-4" {
		t.Errorf("db-1 after the drain of compute-2: %+v %v, want ACTIVE on compute-4", v, err)
	}

	run("log out", chromedp.Click(chromedp.CSS(`form.logout button`)), chromedp.WaitVisible(chromedp.CSS(`form.login`)))
}

// createAndWait creates one server pinned to host through the API and
// waits for status; its id.
func createAndWait(t *testing.T, ctx context.Context, c *api.Client, name, host, status string) string {
	t.Helper()
	resp, err := c.CreateServers(ctx, api.CreateRequest{Name: name, Flavor: "m1.tiny", Count: 1, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Servers[0].ID
	testwait.Poll(t, time.Minute, name+" "+status, func() (bool, string) {
		v, err := c.GetServer(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return v.Status == status, v.Status
	})
	return id
}

// novaLogin is admin's project-scoped token from the identity API.
func novaLogin(t *testing.T, ctx context.Context, identityURL string) string {
	t.Helper()
	body := `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "domain": {"id": "default"}, "password": "admin-pw"}}}, "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, identityURL+"/v3/auth/tokens", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("log in to the identity API: %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token")
}

// nova posts a server action through the Nova API and wants code.
func nova(t *testing.T, ctx context.Context, base, token, id string, action any, code int) {
	t.Helper()
	b, err := json.Marshal(action)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2.1/servers/"+id+"/action", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("X-OpenStack-Nova-API-Version", "latest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Fatalf("action %s on %s: %d %s, want %d", b, id, resp.StatusCode, out, code)
	}
}

// screenshot saves the page to docs/console/NAME.png with
// -update-screenshots; otherwise it only checks one can be taken.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !*updateScreenshots {
		return
	}
	path := filepath.Join("..", "docs", "console", name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// quote is s as a JavaScript string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "<", `\x3c`)
	return "'" + r.Replace(s) + "'"
}
