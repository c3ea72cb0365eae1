package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// The authorization matrix of /v1: every route of routeTable, as each
// kind of caller, over real HTTP with real identity tokens, in keystone
// mode. A route added to routeTable needs a row in v1Matrix
// (TestV1AuthMatrixCoversEveryRoute fails until it has one); its
// statuses say what Nova's default policy lets each caller do, as
// compute/auth_matrix_test.go says of the Nova API.

// The callers. The first four have no valid token and always get 401.
var v1Callers = []string{"anonymous", "garbage token", "other key's token", "expired token",
	"reader of A", "member of B", "member of A", "admin"}

// v1Row is one request and the status each caller with a valid token
// gets (reader of A, member of B, member of A, admin). {agg1} and
// {agg2} in the path stand for the seeded aggregates' ids.
type v1Row struct {
	method, path, body string
	want               [4]int
}

func everyone(ok int) [4]int   { return [4]int{ok, ok, ok, ok} }
func adminsOnly(ok int) [4]int { return [4]int{403, 403, 403, ok} }

// Project A's records, which seedV1Matrix makes: v1ServerOfA ACTIVE on
// compute-1, v1BuildingOfA still a build request, v1GroupOfA a group.
const (
	v1ServerOfA   = "b1b1b1b1-2222-4333-8444-555555555555"
	v1BuildingOfA = "b2b2b2b2-2222-4333-8444-555555555555"
	v1GroupOfA    = "b0b0b0b0-1111-4222-8333-444444444444"
)

var v1Matrix = []v1Row{
	// Flavors: any caller reads them (Nova's flavors index and show
	// have no check beyond a valid token). /v1 has no flavor writes.
	{"GET", "/v1/flavors", "", everyone(200)},
	{"GET", "/v1/flavors/m1.tiny", "", everyone(200)},

	// Servers, as Nova's: index and show PROJECT_READER_OR_ADMIN,
	// create and delete PROJECT_MEMBER_OR_ADMIN; a list is the caller's
	// project's, all_projects (or all_tenants) an admin's. A placed
	// server of another project is 404 for a non-admin (Nova reads the
	// cell with project_only), a build request the policy's 403.
	{"POST", "/v1/servers", `{"name": "new", "flavor": "m1.tiny"}`, [4]int{403, 202, 202, 202}},
	{"GET", "/v1/servers", "", everyone(200)},
	{"GET", "/v1/servers?all_projects=true", "", adminsOnly(200)},
	{"GET", "/v1/servers?all_tenants=1", "", adminsOnly(200)},
	{"GET", "/v1/servers/detail", "", everyone(200)},
	{"GET", "/v1/servers/" + v1ServerOfA, "", [4]int{200, 404, 200, 200}},
	{"GET", "/v1/servers/" + v1BuildingOfA, "", [4]int{200, 403, 200, 200}},
	{"DELETE", "/v1/servers/" + v1ServerOfA, "", [4]int{403, 404, 204, 204}},
	{"DELETE", "/v1/servers/" + v1BuildingOfA, "", [4]int{403, 403, 204, 204}},
	{"GET", "/v1/servers/" + v1ServerOfA + "/selection", "", adminsOnly(200)},
	// Berth's server watch (server-sent events): the list's policy and
	// scoping; B's member gets a stream without A's server.
	{"GET", "/v1/servers/watch?id=" + v1ServerOfA, "", everyone(200)},
	{"GET", "/v1/servers/watch?all_projects=1&id=" + v1ServerOfA, "", adminsOnly(200)},

	// Server groups, as Nova's: B's member gets 404 for A's group;
	// all_projects from a non-admin is answered its own, not refused.
	{"POST", "/v1/server-groups", `{"server_group": {"name": "new", "policy": "anti-affinity"}}`, [4]int{403, 200, 200, 200}},
	{"GET", "/v1/server-groups", "", everyone(200)},
	{"GET", "/v1/server-groups?all_projects=true", "", everyone(200)},
	{"GET", "/v1/server-groups/" + v1GroupOfA, "", [4]int{200, 404, 200, 200}},
	{"DELETE", "/v1/server-groups/" + v1GroupOfA, "", [4]int{403, 404, 204, 204}},

	// Aggregates, and Berth's sync of them into Placement: ADMIN.
	{"POST", "/v1/os-aggregates", `{"aggregate": {"name": "new"}}`, adminsOnly(200)},
	{"GET", "/v1/os-aggregates", "", adminsOnly(200)},
	{"POST", "/v1/os-aggregates/sync", "", adminsOnly(200)},
	{"GET", "/v1/os-aggregates/{agg1}", "", adminsOnly(200)},
	{"PUT", "/v1/os-aggregates/{agg1}", `{"aggregate": {"name": "renamed"}}`, adminsOnly(200)},
	{"DELETE", "/v1/os-aggregates/{agg2}", "", adminsOnly(204)},
	{"POST", "/v1/os-aggregates/{agg1}/action", `{"add_host": {"host": "compute-2"}}`, adminsOnly(200)},

	// Berth's operator extensions: ADMIN.
	{"GET", "/v1/services", "", adminsOnly(200)},
	{"PUT", "/v1/services/compute-2", `{"status": "disabled", "disabled_reason": "maintenance"}`, adminsOnly(200)},
	{"GET", "/v1/hosts", "", adminsOnly(200)},
	// Host drains: compute-1 has one seeded (draining), compute-2 none.
	{"POST", "/v1/hosts/compute-2/drain", `{"parallel": 2, "deadline": "1h"}`, adminsOnly(202)},
	{"GET", "/v1/hosts/compute-1/drain", "", adminsOnly(200)},
	{"DELETE", "/v1/hosts/compute-1/drain", "", adminsOnly(200)},
	{"GET", "/v1/cells", "", adminsOnly(200)},
	{"POST", "/v1/cells", `{"name": "cellx"}`, adminsOnly(201)},
	{"POST", "/v1/cells/discover_hosts", "", adminsOnly(200)},
}

func (r v1Row) wantFor(caller string) int {
	for i, c := range v1Callers[4:] {
		if c == caller {
			return r.want[i]
		}
	}
	return http.StatusUnauthorized
}

// v1Env is one cell's records, under a prefix of its own so that one
// caller's success (a delete) does not change the next one's answer.
type v1Env struct {
	url  string
	aggs map[string]string // {agg1}, {agg2} → id
}

// seedV1Matrix makes the records the rows act on: compute-1 and
// compute-2 registered as agents register them, project A's servers and
// group, and two aggregates (agg1 holding compute-1), the aggregates
// through /v1 itself as noauth2's admin. It serves /v1 in keystone mode
// over them until ctx is done.
func seedV1Matrix(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, svc *identity.Service) v1Env {
	t.Helper()
	keys := etcdschema.New(prefix)
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := EnsureFlavors(ctx, cli, keys, DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	var ops []clientv3.Op
	for _, h := range []string{"compute-1", "compute-2"} {
		if err := p.EnsureProvider(ctx, "rp-"+h, h, ""); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(keys.Service(h), etcdschema.MustEncode(&etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: "rp-" + h})))
	}
	ops = append(ops, clientv3.OpPut(keys.HostDrain("compute-1"), etcdschema.MustEncode(&etcdschema.HostDrain{Host: "compute-1",
		Parallel: 4, State: etcdschema.DrainDraining, RequestID: "req-seeded", Instances: []etcdschema.DrainedServer{}})))
	user := identity.DerivedID("user", "member-a")
	created := time.Now().UTC().Add(-time.Minute)
	ops = append(ops, clientv3.OpPut(keys.ServerGroup(v1GroupOfA), etcdschema.MustEncode(&etcdschema.ServerGroup{UUID: v1GroupOfA,
		Name: "g-a", Policy: etcdschema.PolicyAntiAffinity, ProjectID: identitytest.ProjectA, UserID: user, CreatedAt: created})))
	for _, id := range []string{v1ServerOfA, v1BuildingOfA} {
		br := &etcdschema.BuildRequest{InstanceUUID: id, Name: "s-" + id[:2], ReservationID: "r-" + id[:8], Count: 1,
			Flavor: DefaultFlavors()[0].Embedded(), ProjectID: identitytest.ProjectA, UserID: user, RequestID: "req-" + id, CreatedAt: created}
		m := &etcdschema.InstanceMapping{InstanceUUID: id, ProjectID: identitytest.ProjectA, CreatedAt: created}
		if id == v1BuildingOfA {
			ops = append(ops, clientv3.OpPut(keys.BuildRequest(id), etcdschema.MustEncode(br)),
				clientv3.OpPut(keys.InstanceMapping(id), etcdschema.MustEncode(m)))
			continue
		}
		in := &etcdschema.Instance{UUID: id, Name: br.Name, Status: etcdschema.StatusActive, Host: "compute-1", Node: "compute-1",
			Cell: "cell1", Flavor: br.Flavor, ProjectID: identitytest.ProjectA, UserID: user, AvailabilityZone: "nova", Attempts: 1,
			CreatedAt: created, UpdatedAt: created.Add(time.Second)}
		br.CarryTo(in)
		m.Cell = "cell1"
		ops = append(ops, clientv3.OpPut(keys.CellInstance("cell1", id), etcdschema.MustEncode(in)),
			clientv3.OpPut(keys.InstanceMapping(id), etcdschema.MustEncode(m)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}

	seed := httptest.NewServer(New(cli, keys, p, hclog.NewNullLogger())) // noauth2: no token is admin
	defer seed.Close()
	c := NewClient(seed.URL)
	env := v1Env{aggs: map[string]string{}}
	for _, name := range []string{"agg1", "agg2"} {
		a, err := c.CreateAggregate(ctx, name, "")
		if err != nil {
			t.Fatal(err)
		}
		env.aggs["{"+name+"}"] = a.ID
	}
	if _, err := c.AggregateAddHost(ctx, env.aggs["{agg1}"], "compute-1"); err != nil {
		t.Fatal(err)
	}

	s := New(cli, keys, p, hclog.NewNullLogger())
	s.TraitSyncTimeout = time.Second
	s.SetAuth(Auth{Keystone: true, Verifier: svc.Verifier(), IdentityURI: "http://keystone.test:5000"})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	env.url = srv.URL
	return env
}

// call sends rw as the holder of token; it returns the status and the
// WWW-Authenticate header.
func (e v1Env) call(t *testing.T, rw v1Row, token string) (int, string, string) {
	t.Helper()
	path := rw.path
	for k, v := range e.aggs {
		path = strings.ReplaceAll(path, k, v)
	}
	req, err := http.NewRequest(rw.method, e.url+path, strings.NewReader(rw.body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if rw.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		// A watch streams until its deadline: its first event will do.
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), first
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func TestV1AuthMatrix(t *testing.T) {
	cli := etcdtest.Client(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	svc, err := identity.New(identitytest.Directory(t, time.Hour), key)
	if err != nil {
		t.Fatal(err)
	}
	tokens := identitytest.Tokens(t, svc, key)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The callers without a valid token change nothing: one set of
	// records serves all of their cells.
	shared := seedV1Matrix(ctx, t, cli, "/v1matrix/unauthenticated", svc)
	n := 0
	for _, rw := range v1Matrix {
		for _, caller := range v1Callers {
			env := shared
			if rw.wantFor(caller) != http.StatusUnauthorized {
				n++
				cellCtx, cellCancel := context.WithCancel(ctx)
				defer cellCancel()
				env = seedV1Matrix(cellCtx, t, cli, fmt.Sprintf("/v1matrix/%d", n), svc)
			}
			status, wwwAuth, body := env.call(t, rw, tokens[caller])
			if want := rw.wantFor(caller); status != want {
				t.Errorf("%s %s %s as %s: %d, want %d: %s", rw.method, rw.path, rw.body, caller, status, want, body)
			}
			switch {
			case status == http.StatusUnauthorized && wwwAuth != `Keystone uri="http://keystone.test:5000"`:
				t.Errorf("%s %s as %s: 401 without keystonemiddleware's WWW-Authenticate: %q", rw.method, rw.path, caller, wwwAuth)
			case status == http.StatusForbidden && !strings.Contains(body, `"forbidden"`) && !strings.Contains(body, "Policy doesn't allow"):
				t.Errorf("%s %s as %s: 403 not in Nova's shape: %s", rw.method, rw.path, caller, body)
			}
		}
	}
}

// TestV1AuthMatrixCoversEveryRoute: every route of routeTable has a row,
// so a /v1 route added without deciding who may call it fails here.
func TestV1AuthMatrixCoversEveryRoute(t *testing.T) {
	s := New(nil, etcdschema.New("/unused"), nil, hclog.NewNullLogger())
	covered := map[string]bool{}
	for _, rw := range v1Matrix {
		path, _, _ := strings.Cut(rw.path, "?")
		path = strings.NewReplacer("{agg1}", v1GroupOfA, "{agg2}", v1GroupOfA).Replace(path)
		var m mux.RouteMatch
		if !s.router.Match(httptest.NewRequest(rw.method, path, nil), &m) || m.Route == nil {
			t.Errorf("row %s %s matches no route", rw.method, rw.path)
			continue
		}
		tmpl, _ := m.Route.GetPathTemplate()
		covered[rw.method+" "+tmpl] = true
	}
	for _, rt := range s.routes {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("route %s %s has no row in v1Matrix", rt.method, rt.path)
		}
	}
	if len(s.routes) < 25 {
		t.Errorf("only %d /v1 routes in the table", len(s.routes))
	}
}

// TestV1NoAuthIsNoAuth2: without keystone, /v1 reads the token as
// Nova's noauth2 does: none is admin:admin, "user:project" a member of
// project, so a member sees its own servers and not another's.
func TestV1NoAuthIsNoAuth2(t *testing.T) {
	srv, _ := newAPI(t)
	mk := func(token string) *Client {
		c := NewClient(srv.URL)
		c.Token = token
		return c
	}
	ctx := context.Background()
	alice, bob, admin := mk("alice:pa"), mk("bob:pb"), mk("")
	res, err := alice.CreateServers(ctx, CreateRequest{Name: "a", Flavor: "m1.tiny", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Servers[0].ID
	got, err := alice.GetServer(ctx, id)
	if err != nil || got.ProjectID != "pa" || got.UserID != "alice" {
		t.Fatalf("alice's server: %+v, %v; want project pa, user alice", got, err)
	}
	if list, err := bob.ListServers(ctx); err != nil || len(list) != 0 {
		t.Errorf("bob lists %d servers (%v), want none of alice's", len(list), err)
	}
	if _, err := bob.ListAllServers(ctx); !isStatus(err, 403) {
		t.Errorf("bob lists all projects: %v, want 403", err)
	}
	if list, err := admin.ListServers(ctx); err != nil || len(list) != 0 {
		t.Errorf("admin (project admin) lists %d servers of its own (%v), want 0", len(list), err)
	}
	if list, err := admin.ListAllServers(ctx); err != nil || len(list) != 1 {
		t.Errorf("admin lists %d servers of all projects (%v), want 1", len(list), err)
	}
	if err := bob.DeleteServer(ctx, id); !isStatus(err, 403) {
		// Still a build request: read unscoped, the policy refuses.
		t.Errorf("bob deletes alice's server: %v, want 403", err)
	}
	if _, err := bob.ListHosts(ctx); !isStatus(err, 403) {
		t.Errorf("bob lists hosts: %v, want 403", err)
	}
}

func isStatus(err error, status int) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == status
}
