package api

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/httpserve"
)

// The server watch over real etcd and a real listener with the
// deployment's request deadline (httpserve), as berth server serves it.

const (
	watchA1 = "a1a1a1a1-2222-4333-8444-555555555555"
	watchA2 = "a2a2a2a2-2222-4333-8444-555555555555"
	watchB1 = "b1b1b1b1-2222-4333-8444-555555555555"
)

// watchEnv serves /v1 over keys with requestTimeout as every request's
// deadline; it returns the base URL.
func watchEnv(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, requestTimeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserve.New("compute API", New(cli, keys, noAllocations{}, hclog.NewNullLogger()),
		httpserve.Limits{RequestTimeout: requestTimeout}, hclog.NewNullLogger())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// seedBuilding stores a server of project as a conductor-less create
// leaves it: a BuildRequest and an InstanceMapping without a cell.
func seedBuilding(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, id, project string) {
	t.Helper()
	now := time.Now().UTC()
	br := &etcdschema.BuildRequest{InstanceUUID: id, Name: "w-" + id[:2], ReservationID: "r-1", Count: 1,
		Flavor: DefaultFlavors()[0].Embedded(), ProjectID: project, UserID: "u", RequestID: "req-" + id, CreatedAt: now}
	m := &etcdschema.InstanceMapping{InstanceUUID: id, ProjectID: project, CreatedAt: now}
	if _, err := cli.Txn(context.Background()).Then(clientv3.OpPut(keys.BuildRequest(id), etcdschema.MustEncode(br)),
		clientv3.OpPut(keys.InstanceMapping(id), etcdschema.MustEncode(m))).Commit(); err != nil {
		t.Fatal(err)
	}
}

// place moves a building server into cell1 with status, in one
// transaction as the conductor does (BuildRequest gone, instance and
// mapping written).
func place(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, id, project, status string) {
	t.Helper()
	now := time.Now().UTC()
	in := &etcdschema.Instance{UUID: id, Name: "w-" + id[:2], Status: status, Host: "compute-1", Node: "compute-1",
		Cell: "cell1", Flavor: DefaultFlavors()[0].Embedded(), ProjectID: project, UserID: "u", AvailabilityZone: "nova",
		Attempts: 1, CreatedAt: now, UpdatedAt: now}
	m := &etcdschema.InstanceMapping{InstanceUUID: id, ProjectID: project, Cell: "cell1", CreatedAt: now}
	if _, err := cli.Txn(context.Background()).Then(clientv3.OpDelete(keys.BuildRequest(id)),
		clientv3.OpPut(keys.CellInstance("cell1", id), etcdschema.MustEncode(in)),
		clientv3.OpPut(keys.InstanceMapping(id), etcdschema.MustEncode(m))).Commit(); err != nil {
		t.Fatal(err)
	}
}

// watchInto runs a watch as token and sends its events to the returned
// channel, which closes when the stream ends; the error follows on errc.
func watchInto(ctx context.Context, base, token string, from int64, ids ...string) (<-chan WatchEvent, <-chan error) {
	c := NewClient(base)
	c.Token = token
	events := make(chan WatchEvent, 16)
	errc := make(chan error, 1)
	go func() {
		defer close(events)
		errc <- c.WatchServers(ctx, ids, from, func(ev WatchEvent) bool {
			select {
			case events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return events, errc
}

func next(t *testing.T, events <-chan WatchEvent, what string) WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no event in 20s", what)
	}
	return WatchEvent{}
}

func statuses(vs []ServerView) map[string]string {
	out := map[string]string{}
	for _, v := range vs {
		out[v.ID] = v.Status
	}
	return out
}

func TestWatchServersStreamsChangesOfTheCallersProject(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/watch")
	base := watchEnv(t, cli, keys, time.Minute)
	for id, project := range map[string]string{watchA1: "proj-a", watchA2: "proj-a", watchB1: "proj-b"} {
		seedBuilding(t, cli, keys, id, project)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, errc := watchInto(ctx, base, "member:proj-a", 0, watchA1, watchA2, watchB1)

	first := next(t, events, "first event")
	if got := statuses(first.Servers); len(got) != 2 || got[watchA1] != "BUILD" || got[watchA2] != "BUILD" {
		t.Fatalf("first event: %v, want A's two servers in BUILD and not B's", got)
	}
	place(t, cli, keys, watchA1, "proj-a", etcdschema.StatusActive)
	if ev := next(t, events, "A1 placed"); ev.Server == nil || ev.Server.ID != watchA1 || ev.Server.Status != "ACTIVE" || ev.Revision <= first.Revision {
		t.Fatalf("after placing A1: %+v, want A1 ACTIVE at a later revision than %d", ev, first.Revision)
	}
	// B's server changes too, but only A2's change may follow.
	place(t, cli, keys, watchB1, "proj-b", etcdschema.StatusActive)
	place(t, cli, keys, watchA2, "proj-a", etcdschema.StatusError)
	if ev := next(t, events, "A2 placed"); ev.Server == nil || ev.Server.ID != watchA2 || ev.Server.Status != "ERROR" {
		t.Fatalf("after placing B1 then A2: %+v, want A2 ERROR (B's server is not A's to see)", ev)
	}
	cancel()
	for range events {
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("watch ended by the caller: %v", err)
	}

	// A reconnect from the first event's revision replays every change
	// after it: the servers as they were, then both placements.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	events, _ = watchInto(ctx2, base, "member:proj-a", first.Revision, watchA1, watchA2, watchB1)
	if ev := next(t, events, "resumed first event"); ev.Revision != first.Revision || len(ev.Servers) != 2 ||
		statuses(ev.Servers)[watchA1] != "BUILD" {
		t.Fatalf("resumed at %d: first event %+v, want A's servers in BUILD at %d", first.Revision, ev, first.Revision)
	}
	got := map[string]string{}
	for len(got) < 2 {
		ev := next(t, events, "replayed change")
		if ev.Server == nil || ev.Server.ProjectID != "proj-a" {
			t.Fatalf("replayed %+v, want only A's servers' changes", ev)
		}
		got[ev.Server.ID] = ev.Server.Status
	}
	if got[watchA1] != "ACTIVE" || got[watchA2] != "ERROR" {
		t.Errorf("replayed %v, want A1 ACTIVE and A2 ERROR", got)
	}

	// An admin with all_projects sees B's server; without it, its own
	// project's only (none here).
	admin := NewClient(base)
	var adminFirst []ServerView
	if err := admin.WatchServers(context.Background(), []string{watchB1}, 0, func(ev WatchEvent) bool {
		adminFirst = ev.Servers
		return false
	}); err != nil || len(adminFirst) != 0 {
		t.Errorf("admin without all_projects: %v, %v; want no server of B", adminFirst, err)
	}
	resp, err := http.Get(base + "/v1/servers/watch?all_projects=1&id=" + watchB1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	for sc := bufio.NewScanner(resp.Body); len(lines) < 3 && sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 || lines[1] != "event: servers" || !strings.Contains(lines[2], `"id":"`+watchB1+`"`) {
		t.Errorf("admin with all_projects: first event %q, want B's server", lines)
	}
}

func TestWatchServersEndsAtTheRequestDeadline(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/watchdeadline")
	const deadline = 1500 * time.Millisecond
	base := watchEnv(t, cli, keys, deadline)
	seedBuilding(t, cli, keys, watchA1, "proj-a")
	start := time.Now()
	n := 0
	err := NewClient(base).WatchServers(context.Background(), []string{watchA1}, 0, func(WatchEvent) bool { n++; return true })
	if elapsed := time.Since(start); err != nil || n != 1 || elapsed < deadline || elapsed > deadline+15*time.Second {
		t.Errorf("watch of a server that never changes: %d event(s), ended after %s with %v; want 1 event and nil at the %s deadline",
			n, elapsed.Round(time.Millisecond), err, deadline)
	}
}

func TestWatchServersRefusesBadRequests(t *testing.T) {
	cli := etcdtest.Client(t)
	base := watchEnv(t, cli, etcdschema.New("/watchbad"), time.Minute)
	for _, q := range []string{"", "?id=nope"} {
		code, _ := do(t, http.MethodGet, base+"/v1/servers/watch"+q, "")
		if code != http.StatusBadRequest {
			t.Errorf("watch%s: %d, want 400", q, code)
		}
	}
	err := NewClient(base).WatchServers(context.Background(), []string{watchA1}, 0, func(WatchEvent) bool { return false })
	if err != nil {
		t.Errorf("watch of a server that does not exist: %v, want an empty first event", err)
	}
}

// bury records building server id in cell0 as the superconductor does
// when no host fits: ERROR, no host, its BuildRequest removed.
func bury(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, id string) {
	t.Helper()
	resp, err := cli.Get(context.Background(), keys.BuildRequest(id))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the BuildRequest of %s: %v (%d keys)", id, err, len(resp.Kvs))
	}
	var br etcdschema.BuildRequest
	if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &br); err != nil {
		t.Fatal(err)
	}
	cmps, ops := records.BuryInCell0(keys, &br, "No valid host was found.", time.Now().UTC())
	txn, err := cli.Txn(context.Background()).If(cmps...).Then(append(ops, clientv3.OpDelete(keys.BuildRequest(id)))...).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("bury %s: %v (succeeded %v)", id, err, txn != nil && txn.Succeeded)
	}
}

// TestWatchServersSaysWhenAServerIsGone: a server the stream showed
// that stops existing gets one "gone" event, whether it was still a
// BuildRequest or had reached a cell, so a waiting client need not wait
// for its timeout; another project's server that goes is not named; a
// resumed stream replays the gone events too.
func TestWatchServersSaysWhenAServerIsGone(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/watchgone")
	base := watchEnv(t, cli, keys, time.Minute)
	for id, project := range map[string]string{watchA1: "proj-a", watchA2: "proj-a", watchB1: "proj-b"} {
		seedBuilding(t, cli, keys, id, project)
	}
	deleteServer := func(id string) {
		t.Helper()
		if code, body := do(t, http.MethodDelete, base+"/v1/servers/"+id, ""); code != http.StatusNoContent {
			t.Fatalf("DELETE /v1/servers/%s: %d %v", id, code, body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, _ := watchInto(ctx, base, "member:proj-a", 0, watchA1, watchA2, watchB1)
	first := next(t, events, "first event")
	if got := statuses(first.Servers); len(got) != 2 {
		t.Fatalf("first event: %v, want A's two servers", got)
	}

	// Deleted while still a BuildRequest: its records go in one step,
	// with no status change before.
	deleteServer(watchA1)
	if ev := next(t, events, "A1 deleted"); ev.Gone != watchA1 || ev.Server != nil {
		t.Fatalf("after deleting building A1: %+v, want A1 gone", ev)
	}
	// Buried in cell0, then deleted (a hostless instance is removed at
	// once); B's server goes meanwhile, unnamed to A.
	bury(t, cli, keys, watchA2)
	if ev := next(t, events, "A2 buried"); ev.Server == nil || ev.Server.ID != watchA2 || ev.Server.Status != "ERROR" {
		t.Fatalf("after burying A2: %+v, want A2 ERROR", ev)
	}
	deleteServer(watchB1)
	deleteServer(watchA2)
	if ev := next(t, events, "A2 deleted"); ev.Gone != watchA2 {
		t.Fatalf("after deleting B1 then A2: %+v, want A2 gone (B's server is not A's to see)", ev)
	}
	cancel()
	for range events {
	}

	// A stream resumed from the first event replays what followed; a
	// replay may fold changes that etcd delivers together into their
	// outcome (A2's ERROR), but never a server's going.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	events, _ = watchInto(ctx2, base, "member:proj-a", first.Revision, watchA1, watchA2, watchB1)
	if ev := next(t, events, "resumed first event"); len(ev.Servers) != 2 {
		t.Fatalf("resumed first event: %+v, want A's two servers as they were", ev)
	}
	gone := map[string]bool{}
	for len(gone) < 2 {
		ev := next(t, events, "replayed event")
		switch {
		case ev.Gone != "":
			gone[ev.Gone] = true
		case ev.Server == nil || ev.Server.ID != watchA2 || ev.Server.Status != "ERROR" || gone[watchA2]:
			t.Fatalf("replayed %+v, want A1 and A2 gone, A2's ERROR at most before", ev)
		}
	}
	if !gone[watchA1] || !gone[watchA2] {
		t.Errorf("replayed gone events for %v, want A1 and A2", gone)
	}
	// A stream opened now shows nothing, and so has nothing to call gone.
	if ev := next(t, func() <-chan WatchEvent {
		ctx3, cancel3 := context.WithCancel(context.Background())
		t.Cleanup(cancel3)
		ev, _ := watchInto(ctx3, base, "member:proj-a", 0, watchA1, watchA2)
		return ev
	}(), "fresh first event"); len(ev.Servers) != 0 {
		t.Errorf("a fresh stream: %+v, want no server", ev)
	}
}
