package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/servers"
)

// rig is a console over a real etcd with two hosts in cell1 (one
// disabled), their providers, and an ERROR server with its attempts.
type rig struct {
	t      *testing.T
	cli    *clientv3.Client
	keys   etcdschema.Keys
	srv    *httptest.Server
	failed string // the ERROR server's id
	moving string // a server in VERIFY_RESIZE, its resize in flight
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/console-test-" + uuid.NewString()[:8])
	r := &rig{t: t, cli: cli, keys: keys, failed: uuid.NewString(), moving: uuid.NewString()}
	now := time.Now().UTC()
	put := func(key string, v etcdschema.Versioned) {
		if _, err := cli.Put(context.Background(), key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range []string{"compute-1", "compute-2"} {
		prov := uuid.NewString()
		put(keys.Service(h), &etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: prov, Disabled: i == 1,
			DisabledReason: map[bool]string{true: "<b>rack</b> swap"}[i == 1], UpdatedAt: now})
		put(keys.Provider(prov), &etcdschema.Provider{UUID: prov, Name: h, RootProviderUUID: prov,
			Inventories: map[string]etcdschema.Inventory{
				"VCPU":      {Total: 16, AllocationRatio: 4, MaxUnit: 16, MinUnit: 1, StepSize: 1},
				"MEMORY_MB": {Total: 65536, Reserved: 512, AllocationRatio: 1, MaxUnit: 65536, MinUnit: 1, StepSize: 1},
			},
			Usages: map[string]int64{"VCPU": 3, "MEMORY_MB": 1024}})
	}
	put(keys.InstanceMapping(r.failed), &etcdschema.InstanceMapping{InstanceUUID: r.failed, Cell: "cell1", ProjectID: "demo"})
	put(keys.CellInstance("cell1", r.failed), &etcdschema.Instance{UUID: r.failed, Name: "web-1", Cell: "cell1",
		Status: etcdschema.StatusError, ProjectID: "demo", Attempts: 2, Flavor: etcdschema.Flavor{Name: "m1.small"},
		Fault: &etcdschema.Fault{Code: 500, Message: "Exceeded maximum number of retries.", Created: now},
		FailedAttempts: []etcdschema.Attempt{{Host: "compute-1", Reason: "build failed: disk full", At: now},
			{Host: "compute-2", Reason: "build failed: no network", At: now}}})
	// Cells: cell1 with the hosts, cell10 with none (its name sorts
	// after cell1's subtree's keys would if the walk did not jump them),
	// and cell2 with none either.
	for _, c := range []string{"cell1", "cell10", "cell2"} {
		put(keys.Cell(c), &etcdschema.Cell{Name: c, UUID: uuid.NewString(), CreatedAt: now})
	}
	put(keys.InstanceMapping(r.moving), &etcdschema.InstanceMapping{InstanceUUID: r.moving, Cell: "cell1", ProjectID: "demo"})
	put(keys.CellInstance("cell1", r.moving), &etcdschema.Instance{UUID: r.moving, Name: "db-1", Cell: "cell1",
		Status: "VERIFY_RESIZE", Host: "compute-2", ProjectID: "demo", Flavor: etcdschema.Flavor{Name: "m1.large"}})
	migration := func(id, instance, typ, status, src, dst, from, to string, at time.Time, attempts ...etcdschema.Attempt) {
		put(keys.Migration("cell1", id), &etcdschema.Migration{UUID: id, InstanceUUID: instance, Cell: "cell1",
			MigrationType: typ, Status: status, SourceHost: src, SourceNode: src, DestHost: dst, DestNode: dst,
			OldFlavor: etcdschema.Flavor{Name: from}, NewFlavor: etcdschema.Flavor{Name: to}, Attempts: attempts,
			CreatedAt: at, UpdatedAt: at})
	}
	// An old migration of the ERROR server, ended long ago; the resize
	// of db-1 in flight, after one destination failed.
	migration("m-old", r.failed, etcdschema.MigrationTypeMigration, etcdschema.MigrationError, "compute-1", "", "m1.small",
		"m1.small", now.Add(-3*time.Hour))
	migration("m-new", r.moving, etcdschema.MigrationTypeResize, etcdschema.MigrationFinished, "compute-1", "compute-2",
		"m1.small", "m1.large", now.Add(-time.Minute),
		etcdschema.Attempt{Host: "compute-3", Reason: "prep failed: <no> room", At: now}, etcdschema.Attempt{Host: "compute-2", At: now})
	// The leader's count of them, as its server_counts duty keeps it.
	fence, err := cli.Put(context.Background(), keys.All()+"rig-leader", "rig")
	if err != nil {
		t.Fatal(err)
	}
	counts, err := leader.CountServers(context.Background(), cli, keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.RecordServerCounts(context.Background(), cli, keys,
		leader.Fence{Key: keys.All() + "rig-leader", Rev: fence.Header.Revision}, counts, fence.Header.Revision); err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.Keys = cli, keys
	cfg.Hosts = hosts.New(cli, keys, nil)
	cfg.Servers = servers.New(cli, keys, nil, nil)
	cfg.Drains = drain.NewStore(cli, keys, cfg.Hosts, nil)
	cfg.TraitWait = 100 * time.Millisecond
	r.srv = httptest.NewServer(New(cfg).Beside(http.NotFoundHandler()))
	t.Cleanup(r.srv.Close)
	return r
}

// client is a browser: it keeps cookies and does not follow redirects.
func (r *rig) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (r *rig) get(c *http.Client, path string) (int, string) {
	r.t.Helper()
	resp, err := c.Get(r.srv.URL + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *rig) post(c *http.Client, path string, form url.Values) *http.Response {
	r.t.Helper()
	resp, err := c.PostForm(r.srv.URL+path, form)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

func TestPagesShowWhatTheRecordsSay(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	c := r.client()
	for _, tc := range []struct {
		desc, path string
		code       int
		want       []string
		not        []string
	}{
		{desc: "overview: hosts, bars, reasons escaped, counts", path: "/console/", code: 200,
			want: []string{"Auth is off", "Cell cell1", "compute-1", "compute-2", `<meter min="0" max="64" high="54" value="3"`,
				"&lt;b&gt;rack&lt;/b&gt; swap", "<b>2</b> hosts", "<b>1</b> disabled", "<b>2</b> servers", "<b>1</b> ERROR",
				"<b>1</b> VERIFY_RESIZE", "by status as the leader counted them",
				"Cell cell10", "Cell cell2", "No compute host is mapped to this cell yet"},
			not: []string{"<b>rack</b>"}},
		{desc: "host detail with its disable form", path: "/console/hosts/compute-1", code: 200,
			want: []string{"Host compute-1", "Disable compute-1", `name="reason"`, "65024"}},
		{desc: "a disabled host offers enable", path: "/console/hosts/compute-2", code: 200,
			want: []string{"Enable compute-2", "&lt;b&gt;rack&lt;/b&gt; swap"}},
		{desc: "an unknown host", path: "/console/hosts/nope", code: 404, want: []string{"No compute host is named nope"}},
		{desc: "servers filtered by status", path: "/console/servers?status=ERROR", code: 200,
			want: []string{"web-1", "Exceeded maximum number of retries.", "m1.small", "demo"}},
		{desc: "servers filtered to none", path: "/console/servers?status=ACTIVE", code: 200,
			want: []string{"No servers in ACTIVE"}, not: []string{"web-1"}},
		{desc: "server detail: fault and attempts", path: "/console/servers/" + r.failed, code: 200,
			want: []string{"Exceeded maximum number of retries.", "build failed: disk full", "build failed: no network"}},
		{desc: "server detail: no old move shown", path: "/console/servers/" + r.failed, code: 200,
			not: []string{"m-old", "Last move", "Moving now"}},
		{desc: "server detail: the resize in flight", path: "/console/servers/" + r.moving, code: 200,
			want: []string{"Moving now: resize", "finished", "m1.small → m1.large", "prep failed: &lt;no&gt; room",
				`<a href="/console/hosts/compute-1">compute-1</a> → <a href="/console/hosts/compute-2">compute-2</a>`}},
		{desc: "migrations, newest first", path: "/console/migrations", code: 200,
			want: []string{"migration-m-new", "migration-m-old", "resize", "error", "not chosen yet", ">db-1</a>", ">web-1</a>",
				"confirm or revert"}},
		{desc: "a server id that is not a uuid", path: "/console/servers/x%3Cscript%3E", code: 404,
			want: []string{"x&lt;script&gt; is not one"}, not: []string{"<script>"}},
		{desc: "an unknown server", path: "/console/servers/" + uuid.NewString(), code: 404, want: []string{"No server has the id"}},
		{desc: "the script, served with the page's policy", path: "/console/static/console.js", code: 200,
			want: []string{"EventSource"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, body := r.get(c, tc.path)
			if code != tc.code {
				t.Errorf("GET %s: %d, want %d:\n%s", tc.path, code, tc.code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s does not say %q:\n%s", tc.path, w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("GET %s says %q", tc.path, n)
				}
			}
		})
	}
}

func TestDisableFormNeedsCSRFAndRecordsTheReason(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	c := r.client()
	_, page := r.get(c, "/console/hosts/compute-1")
	csrf := csrfOf(t, page)
	// Another site's form: no token, or another browser's.
	for _, bad := range []string{"", "forged"} {
		resp := r.post(c, "/console/hosts/compute-1/status", url.Values{"csrf": {bad}, "action": {"disable"}, "reason": {"x"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("post with csrf %q: %d, want 403", bad, resp.StatusCode)
		}
	}
	resp := r.post(c, "/console/hosts/compute-1/status", url.Values{"csrf": {csrf}, "action": {"disable"}, "reason": {"maintenance"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: %d, want 303", resp.StatusCode)
	}
	h, err := hosts.New(r.cli, r.keys, nil).Get(context.Background(), "compute-1")
	if err != nil || h == nil || !h.Service.Disabled || h.Service.DisabledReason != "maintenance" {
		t.Fatalf("compute-1 after the form: %+v (%v), want disabled for maintenance", h, err)
	}
	if _, page := r.get(c, resp.Header.Get("Location")); !strings.Contains(page, "Enable compute-1") || !strings.Contains(page, "maintenance") {
		t.Errorf("the host page after disabling does not show it:\n%s", page)
	}
	resp = r.post(c, "/console/hosts/compute-1/status", url.Values{"csrf": {csrf}, "action": {"disable"}, "reason": {strings.Repeat("x", 256)}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a 256-character reason: %d, want 400", resp.StatusCode)
	}
}

// TestDrainFormNeedsCSRFAndShowsTheDrain: the drain form is refused
// without this browser's token and with bad input; a drain started from
// it disables the host and shows on the page with its servers, and the
// cancel form ends it. No leader runs here: the page shows the record.
func TestDrainFormNeedsCSRFAndShowsTheDrain(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	if _, err := r.cli.Put(context.Background(), r.keys.HostInstance("compute-1", r.failed),
		etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: r.failed, Host: "compute-1"})); err != nil {
		t.Fatal(err)
	}
	c := r.client()
	_, page := r.get(c, "/console/hosts/compute-1")
	if !strings.Contains(page, "Not drained.") || !strings.Contains(page, "Drain compute-1") {
		t.Fatalf("the host page before a drain:\n%s", page)
	}
	csrf := csrfOf(t, page)
	start := url.Values{"csrf": {csrf}, "action": {"start"}, "parallel": {"2"}, "deadline": {"30m"}}
	for _, tc := range []struct {
		desc   string
		change func(url.Values)
		status int
	}{
		{"no token", func(v url.Values) { v.Del("csrf") }, http.StatusForbidden},
		{"another browser's token", func(v url.Values) { v.Set("csrf", "forged") }, http.StatusForbidden},
		{"parallel not a number", func(v url.Values) { v.Set("parallel", "four") }, http.StatusBadRequest},
		{"parallel too high", func(v url.Values) { v.Set("parallel", "65") }, http.StatusBadRequest},
		{"bad deadline", func(v url.Values) { v.Set("deadline", "soon") }, http.StatusBadRequest},
		{"live without live migration", func(v url.Values) { v.Set("live", "on") }, http.StatusBadRequest},
		{"unknown action", func(v url.Values) { v.Set("action", "evacuate") }, http.StatusBadRequest},
	} {
		form := url.Values{}
		for k, v := range start {
			form[k] = append([]string(nil), v...)
		}
		tc.change(form)
		if resp := r.post(c, "/console/hosts/compute-1/drain", form); resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.desc, resp.StatusCode, tc.status)
		}
	}
	if h, _ := hosts.New(r.cli, r.keys, nil).Get(context.Background(), "compute-1"); h.Service.Disabled {
		t.Fatal("a refused drain form disabled the host")
	}
	resp := r.post(c, "/console/hosts/compute-1/drain", start)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d, want 303", resp.StatusCode)
	}
	_, page = r.get(c, resp.Header.Get("Location"))
	for _, want := range []string{"draining", "0 moved, 0 moving, 1 waiting, 0 failed", "cold migrations, 2 at once", "web-1", "Cancel the drain", "draining"} {
		if !strings.Contains(page, want) {
			t.Errorf("the host page while draining lacks %q:\n%s", want, page)
		}
	}
	if h, _ := hosts.New(r.cli, r.keys, nil).Get(context.Background(), "compute-1"); !h.Service.Disabled || h.Service.DisabledReason != "draining" {
		t.Errorf("compute-1 while draining: %+v", h.Service)
	}
	if resp := r.post(c, "/console/hosts/compute-1/drain", start); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second drain: %d, want 409", resp.StatusCode)
	}
	resp = r.post(c, "/console/hosts/compute-1/drain", url.Values{"csrf": {csrf}, "action": {"cancel"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d, want 303", resp.StatusCode)
	}
	if _, page = r.get(c, "/console/hosts/compute-1"); !strings.Contains(page, "cancelled") || !strings.Contains(page, "Drain compute-1") {
		t.Errorf("the host page after the cancel:\n%s", page)
	}
}

// directory is admin (admin of project admin) and alice (member of demo).
func directory(t *testing.T) *identity.Service {
	t.Helper()
	hash := func(pw string) string {
		h, err := identity.HashPassword(pw)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	svc, err := identity.New(identity.Config{
		Users:    []identity.User{{Name: "admin", PasswordHash: hash("admin-pw")}, {Name: "alice", PasswordHash: hash("alice-pw")}},
		Projects: []identity.Project{{Name: "admin"}, {Name: "demo"}},
		Assignments: []identity.Assignment{{User: "admin", Project: "admin", Role: identity.RoleAdmin},
			{User: "alice", Project: "demo", Role: identity.RoleMember}},
	}, []byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestKeystoneLoginAdminOnlyAndLogout(t *testing.T) {
	svc := directory(t)
	r := newRig(t, Config{Auth: AuthKeystone, Verifier: svc.Verifier(), Issuer: svc})
	login := func(c *http.Client, user, pw, project string) *http.Response {
		_, page := r.get(c, "/console/login")
		return r.post(c, "/console/login", url.Values{"csrf": {csrfOf(t, page)}, "user": {user}, "password": {pw}, "project": {project}})
	}
	c := r.client()
	resp, err := c.Get(r.srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("anonymous overview: %d to %q, want 303 to the login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := r.get(c, "/console/events"); code != http.StatusUnauthorized {
		t.Errorf("anonymous events: %d, want 401", code)
	}
	if resp := login(c, "admin", "wrong", "admin"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", resp.StatusCode)
	}
	if resp := login(c, "admin", "admin-pw", "admin"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin login: %d, want 303", resp.StatusCode)
	}
	for _, ck := range resp.Cookies() {
		t.Logf("cookie %s", ck.Name)
	}
	code, page := r.get(c, "/console/")
	if code != 200 || !strings.Contains(page, "admin on project admin") || strings.Contains(page, "Auth is off") {
		t.Fatalf("admin's overview: %d\n%s", code, page)
	}
	if resp := r.post(c, "/console/logout", url.Values{"csrf": {csrfOf(t, page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, err := c.Get(r.srv.URL + "/console/"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("overview after logout: %v %v, want 303 to the login", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	alice := r.client()
	if resp := login(alice, "alice", "alice-pw", "demo"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("alice login: %d, want 303", resp.StatusCode)
	}
	code, page = r.get(alice, "/console/")
	if code != http.StatusForbidden || !strings.Contains(page, "needs a token with the admin role") {
		t.Errorf("a member's overview: %d, want 403 saying why:\n%s", code, page)
	}
	// Nor may a member change a host, even with the right CSRF token.
	resp = r.post(alice, "/console/hosts/compute-1/status", url.Values{"csrf": {csrfOf(t, page)}, "action": {"disable"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a member's disable: %d, want 403", resp.StatusCode)
	}
	if h, err := hosts.New(r.cli, r.keys, nil).Get(context.Background(), "compute-1"); err != nil || h.Service.Disabled {
		t.Errorf("compute-1 after a member's disable: %+v (%v), want enabled", h, err)
	}
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	svc := directory(t)
	r := newRig(t, Config{Auth: AuthKeystone, Verifier: svc.Verifier(), Issuer: svc})
	c := r.client()
	_, page := r.get(c, "/console/login")
	resp := r.post(c, "/console/login", url.Values{"csrf": {csrfOf(t, page)}, "user": {"admin"}, "password": {"admin-pw"}, "project": {"admin"}})
	var found bool
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			found = true
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" {
				t.Errorf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/console/", ck)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie after a login")
	}
}

// TestEventsSignalAChange follows the stream from a page's revision and
// sees a change event for a host disabled after it.
func TestEventsSignalAChange(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	c := r.client()
	_, page := r.get(c, "/console/")
	rev := regexp.MustCompile(`data-rev="(\d+)"`).FindStringSubmatch(page)
	if rev == nil {
		t.Fatalf("no data-rev in the overview:\n%s", page)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/console/events?from="+rev[1], nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	// A change after the page's revision, before or after the stream
	// started: either way the stream reports it.
	reason := "after the page"
	if _, err := hosts.New(r.cli, r.keys, nil).Update(ctx, "compute-1", hosts.Change{Disabled: new(true), DisabledReason: &reason}, 0); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: change" {
			return
		}
	}
	t.Fatalf("the stream ended without a change event: %v", sc.Err())
}

func TestEventStreamsAreBounded(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth, MaxStreams: 1})
	c := r.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/console/events", nil)
	first, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if code, _ := r.get(c, "/console/events"); code != http.StatusServiceUnavailable {
		t.Errorf("a second stream over the bound of 1: %d, want 503", code)
	}
}

// TestEventsFromAnUnknownRevisionRefreshAtOnce: a revision the store has
// not reached (or one too old to replay) is not trusted; the stream says
// "change" at once so the page re-reads.
func TestEventsFromAnUnknownRevisionRefreshAtOnce(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/console/events?from=999999999", nil)
	resp, err := r.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: change" {
			return
		}
	}
	t.Fatalf("no change event for a revision from the future: %v", sc.Err())
}

// The migrations page lists every cell's moves newest first.
func TestMigrationsNewestFirst(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	code, body := r.get(r.client(), "/console/migrations")
	if code != http.StatusOK {
		t.Fatalf("GET /console/migrations: %d\n%s", code, body)
	}
	// One in another cell, newer than both of cell1's.
	if _, err := r.cli.Put(context.Background(), r.keys.Migration("cell2", "m-cell2"), etcdschema.MustEncode(&etcdschema.Migration{
		UUID: "m-cell2", InstanceUUID: uuid.NewString(), Cell: "cell2", MigrationType: etcdschema.MigrationTypeMigration,
		Status: etcdschema.MigrationPreMigrating, SourceHost: "compute-9", CreatedAt: time.Now(), UpdatedAt: time.Now()})); err != nil {
		t.Fatal(err)
	}
	_, body = r.get(r.client(), "/console/migrations")
	cell2, newer, older := strings.Index(body, "migration-m-cell2"), strings.Index(body, "migration-m-new"), strings.Index(body, "migration-m-old")
	if cell2 < 0 || newer < 0 || older < 0 || !(cell2 < newer && newer < older) {
		t.Errorf("migrations at %d (cell2), %d (new), %d (old); want all, newest first:\n%s", cell2, newer, older, body)
	}
}

// Names are read in batches: more moves than one batch all get theirs.
func TestMigrationsNameEveryServer(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	n := namesPerRead + 6
	for i := range n {
		id := fmt.Sprintf("m-%03d", i)
		if _, err := r.cli.Put(context.Background(), r.keys.Migration("cell1", id), etcdschema.MustEncode(&etcdschema.Migration{
			UUID: id, InstanceUUID: r.moving, Cell: "cell1", MigrationType: etcdschema.MigrationTypeMigration,
			Status: etcdschema.MigrationConfirmed, SourceHost: "compute-1", CreatedAt: time.Now()})); err != nil {
			t.Fatal(err)
		}
	}
	_, body := r.get(r.client(), "/console/migrations")
	// n of these, the rig's resize of db-1 and the rig's move of web-1.
	if got := strings.Count(body, ">db-1</a>"); got != n+1 {
		t.Errorf("db-1 named %d times, want %d", got, n+1)
	}
}

// The servers list pages by id: each page links the next, the last none,
// and the pages together show each server once.
func TestServersListPages(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	c := r.client()
	next := regexp.MustCompile(`class="next" href="/console/servers\?([^"]+)"`)
	seen := map[string]int{}
	path := "/console/servers?limit=1"
	for pages := 0; ; pages++ {
		if pages > 2 {
			t.Fatalf("more than 2 pages of 1 for the rig's 2 servers")
		}
		code, body := r.get(c, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		if !strings.Contains(body, "2 servers in all") {
			t.Errorf("GET %s does not count 2 servers:\n%s", path, body)
		}
		for _, id := range []string{r.failed, r.moving} {
			if strings.Contains(body, `id="server-`+id+`"`) {
				seen[id]++
			}
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = "/console/servers?" + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if seen[r.failed] != 1 || seen[r.moving] != 1 {
		t.Errorf("servers seen %v over the pages, want each once", seen)
	}
	if code, body := r.get(c, "/console/servers?limit=x"); code != http.StatusBadRequest || !strings.Contains(body, "limit is a whole number") {
		t.Errorf("limit=x: %d\n%s", code, body)
	}
}

// TestOverviewCountsWithoutReadingServers: the overview's total is
// etcd's count of the mappings, now; its counts by status are the
// leader's last, and before a leader has counted it says so rather than
// reading every server.
func TestOverviewCountsWithoutReadingServers(t *testing.T) {
	r := newRig(t, Config{Auth: AuthNoAuth})
	c := r.client()
	// A server created after the leader's count: in the total at once.
	extra := uuid.NewString()
	if _, err := r.cli.Put(context.Background(), r.keys.InstanceMapping(extra),
		etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: extra, ProjectID: "demo"})); err != nil {
		t.Fatal(err)
	}
	if code, body := r.get(c, "/console/"); code != 200 || !strings.Contains(body, "<b>3</b> servers") || !strings.Contains(body, "<b>1</b> ERROR") {
		t.Errorf("overview after a create the leader has not counted: %d\n%s", code, body)
	}
	if _, err := r.cli.Delete(context.Background(), r.keys.ServerCounts()); err != nil {
		t.Fatal(err)
	}
	code, body := r.get(c, "/console/")
	if code != 200 || !strings.Contains(body, "<b>3</b> servers") || !strings.Contains(body, "by status once the leader has counted them") ||
		strings.Contains(body, "ERROR</a>") {
		t.Errorf("overview before any count: %d\n%s", code, body)
	}
}
