package compute

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// TestLiveMigrateAPI: os-migrateLive's answers and refusals, each in
// Nova's words: 202 with the server MIGRATING and a live-migration
// accepted; a server not ACTIVE or already moving is 409; a host that is
// not there, the server's own host, force without a host, and a driver
// that cannot live migrate (Nova's MigrationPreCheckError) are 400; the
// schema follows the microversion; and only an admin may.
func TestLiveMigrateAPI(t *testing.T) {
	a := newTestAPI(t)
	ctx := context.Background()
	for host, can := range map[string]bool{"compute-1": true, "compute-2": true, "compute-3": false} {
		svc := &etcdschema.Service{Host: host, Cell: "cell1", ProviderUUID: "rp-" + host, CanLiveMigrate: can}
		if _, err := a.cli.Put(ctx, a.keys.Service(host), etcdschema.MustEncode(svc)); err != nil {
			t.Fatal(err)
		}
	}
	server := func(host, status string) string {
		t.Helper()
		res, err := a.api.servers.Create(ctx, servers.CreateRequest{Name: "live", Flavor: tiny, Count: 1,
			ProjectID: "admin", UserID: "admin", RequestID: "req-live"})
		if err != nil {
			t.Fatal(err)
		}
		id := res.BuildRequests[0].InstanceUUID
		a.place(id, host, status, time.Now().UTC(), nil)
		return id
	}
	onOne, onThree, errored := server("compute-1", etcdschema.StatusActive), server("compute-3", etcdschema.StatusActive),
		server("compute-1", etcdschema.StatusError)
	const admin = "X-Auth-Token: admin:admin"
	body := func(host string) string {
		return fmt.Sprintf(`{"os-migrateLive": {"host": %s, "block_migration": "auto"}}`, host)
	}
	cases := []struct {
		desc, id, body string
		hdr            []string
		status         int
		fault          string
	}{
		{desc: "not admin", id: onOne, body: body("null"), hdr: []string{"X-Auth-Token: member:admin"}, status: 403,
			fault: `{"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:os-migrate-server:migrate_live to be performed."}}`},
		{desc: "not ACTIVE", id: errored, body: body("null"), status: 409,
			fault: `{"conflictingRequest": {"code": 409, "message": "Cannot 'os-migrateLive' instance ` + errored + ` while it is in vm_state error"}}`},
		{desc: "unknown host", id: onOne, body: body(`"nowhere"`), status: 400,
			fault: `{"badRequest": {"code": 400, "message": "Compute host nowhere could not be found."}}`},
		{desc: "its own host", id: onOne, body: body(`"compute-1"`), status: 400,
			fault: `{"badRequest": {"code": 400, "message": "Unable to migrate instance (` + onOne + `) to current host (compute-1)."}}`},
		{desc: "a source that cannot live migrate", id: onThree, body: body("null"), status: 400,
			fault: `{"badRequest": {"code": 400, "message": "Migration pre-check error: The compute driver of host compute-3 cannot live migrate."}}`},
		{desc: "a destination that cannot live migrate", id: onOne, body: body(`"compute-3"`), status: 400,
			fault: `{"badRequest": {"code": 400, "message": "Migration pre-check error: The compute driver of host compute-3 cannot live migrate."}}`},
		{desc: "force without a host", id: onOne, hdr: []string{mv("2.30")}, status: 400,
			body:  `{"os-migrateLive": {"host": null, "block_migration": "auto", "force": true}}`,
			fault: `{"badRequest": {"code": 400, "message": "Can't force to a non-provided destination"}}`},
		{desc: "force is gone at 2.68", id: onOne, hdr: []string{mv("2.68")}, status: 400,
			body: `{"os-migrateLive": {"host": null, "block_migration": "auto", "force": false}}`},
		{desc: "auto before 2.25", id: onOne, hdr: []string{mv("2.24")}, status: 400,
			body: `{"os-migrateLive": {"host": null, "block_migration": "auto", "disk_over_commit": false}}`},
		{desc: "disk_over_commit required before 2.25", id: onOne, hdr: []string{mv("2.24")}, status: 400,
			body: `{"os-migrateLive": {"host": null, "block_migration": false}}`},
		{desc: "host required", id: onOne, body: `{"os-migrateLive": {"block_migration": "auto"}}`, status: 400},
		{desc: "accepted", id: onOne, body: body(`"compute-2"`), status: 202},
		{desc: "already migrating", id: onOne, body: body("null"), status: 409,
			fault: `{"conflictingRequest": {"code": 409, "message": "Cannot 'os-migrateLive' instance ` + onOne + ` while it is in task_state migrating"}}`},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			hdr, auth, ver := c.hdr, admin, mv("2.93")
			for _, h := range hdr {
				if strings.HasPrefix(h, "X-Auth-Token") {
					auth = ""
				}
				if strings.HasPrefix(h, "OpenStack-API-Version") {
					ver = ""
				}
			}
			for _, h := range []string{auth, ver} {
				if h != "" {
					hdr = append(hdr, h)
				}
			}
			got := a.do("POST", "/v2.1/servers/"+c.id+"/action", c.body, hdr...)
			if got.Code != c.status || (c.fault != "" && got.Body.String() != c.fault) {
				t.Errorf("%d %s\nwant %d %s", got.Code, got.Body, c.status, c.fault)
			}
		})
	}

	// The accepted one: MIGRATING, and a live-migration for the
	// superconductors, pinned to compute-2 and not forced (2.68+).
	got := a.do("GET", "/v2.1/servers/"+onOne, "", admin, mv("2.93"))
	if got.Code != 200 || !strings.Contains(got.Body.String(), `"status": "MIGRATING"`) {
		t.Errorf("server after the accept: %d %s", got.Code, got.Body)
	}
	resp, err := a.cli.Get(ctx, a.keys.MoveRequest(onOne))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("move request: %v %v", resp, err)
	}
	var req etcdschema.MoveRequest
	if err := etcdschema.Decode(a.keys.MoveRequest(onOne), resp.Kvs[0].Value, &req); err != nil {
		t.Fatal(err)
	}
	mresp, err := a.cli.Get(ctx, a.keys.Migration("cell1", req.MigrationUUID))
	if err != nil || len(mresp.Kvs) != 1 {
		t.Fatalf("migration: %v", err)
	}
	var mig etcdschema.Migration
	if err := etcdschema.Decode("", mresp.Kvs[0].Value, &mig); err != nil {
		t.Fatal(err)
	}
	if req.Kind != etcdschema.MigrationTypeLiveMigration || mig.Status != etcdschema.MigrationAccepted ||
		mig.RequestedHost != "compute-2" || mig.ForceHost || mig.SourceHost != "compute-1" {
		t.Errorf("request %+v, migration %+v", req, mig)
	}
	if n, err := a.cli.Get(ctx, a.keys.MigrationMapping(mig.UUID), clientv3.WithCountOnly()); err != nil || n.Count != 1 {
		t.Errorf("no migration mapping: %v", err)
	}

	// In progress once running: listed and shown by id (2.23), not
	// while accepted (Nova's in-progress statuses).
	list := func() string {
		t.Helper()
		got := a.do("GET", "/v2.1/servers/"+onOne+"/migrations", "", admin, mv("2.23"))
		if got.Code != 200 {
			t.Fatalf("server migrations: %d %s", got.Code, got.Body)
		}
		return got.Body.String()
	}
	if body := list(); body != `{"migrations": []}` {
		t.Errorf("an accepted live migration is listed in progress: %s", body)
	}
	mig.Status, mig.DestHost, mig.DestNode = etcdschema.MigrationRunning, "compute-2", "compute-2"
	if _, err := a.cli.Put(ctx, a.keys.Migration("cell1", mig.UUID), etcdschema.MustEncode(&mig)); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(mresp.Kvs[0].CreateRevision)
	want := `{"migrations": [{"created_at": "` + mig.CreatedAt.Truncate(time.Second).Format("2006-01-02T15:04:05.000000") +
		`", "dest_compute": "compute-2", "dest_host": "compute-2", "dest_node": "compute-2", "disk_processed_bytes": null, ` +
		`"disk_remaining_bytes": null, "disk_total_bytes": null, "id": ` + id + `, "memory_processed_bytes": null, ` +
		`"memory_remaining_bytes": null, "memory_total_bytes": null, "server_uuid": "` + onOne + `", ` +
		`"source_compute": "compute-1", "source_node": "compute-1", "status": "running", "updated_at": "` +
		mig.UpdatedAt.Truncate(time.Second).Format("2006-01-02T15:04:05.000000") + `"}]}`
	if body := list(); body != want {
		t.Errorf("running live migration:\n got %s\nwant %s", body, want)
	}
	if got := a.do("GET", "/v2.1/servers/"+onOne+"/migrations/"+id, "", admin, mv("2.80")); got.Code != 200 ||
		!strings.Contains(got.Body.String(), `"uuid": "`+mig.UUID+`", "user_id": "admin", "project_id": "admin"`) {
		t.Errorf("show at 2.80: %d %s", got.Code, got.Body)
	}
	got = a.do("GET", "/v2.1/servers/"+onOne+"/migrations/999999", "", admin, mv("2.23"))
	if want := `{"itemNotFound": {"code": 404, "message": "In-progress live migration 999999 is not found for server ` + onOne + `."}}`; got.Code != 404 || got.Body.String() != want {
		t.Errorf("show of another id: %d %s\nwant %s", got.Code, got.Body, want)
	}

	// Abort (2.24): an unknown id is Nova's 404; the running one is
	// accepted and recorded; a second abort is Nova's InvalidMigrationState.
	got = a.do("DELETE", "/v2.1/servers/"+onOne+"/migrations/999999", "", admin, mv("2.24"))
	if want := `{"itemNotFound": {"code": 404, "message": "Migration 999999 not found for instance ` + onOne + `"}}`; got.Code != 404 || got.Body.String() != want {
		t.Errorf("abort of another id: %d %s\nwant %s", got.Code, got.Body, want)
	}
	if got = a.do("DELETE", "/v2.1/servers/"+onOne+"/migrations/"+id, "", admin, mv("2.24")); got.Code != 202 {
		t.Errorf("abort: %d %s", got.Code, got.Body)
	}
	mresp, err = a.cli.Get(ctx, a.keys.Migration("cell1", mig.UUID))
	if err != nil || etcdschema.Decode("", mresp.Kvs[0].Value, &mig) != nil || mig.AbortRequestID == "" {
		t.Errorf("abort not recorded: %+v %v", mig, err)
	}
	got = a.do("DELETE", "/v2.1/servers/"+onOne+"/migrations/"+id, "", admin, mv("2.24"))
	if want := `{"badRequest": {"code": 400, "message": "Migration ` + id + ` state of instance ` + onOne +
		` is running. Cannot abort live migration while the migration is in this state."}}`; got.Code != 400 || got.Body.String() != want {
		t.Errorf("abort again: %d %s\nwant %s", got.Code, got.Body, want)
	}

	// force_complete (2.22): an unknown id is 400 here (Nova's
	// MigrationNotFoundForInstance), the running one 202.
	force := `{"force_complete": null}`
	got = a.do("POST", "/v2.1/servers/"+onOne+"/migrations/999999/action", force, admin, mv("2.22"))
	if want := `{"badRequest": {"code": 400, "message": "Migration 999999 not found for instance ` + onOne + `"}}`; got.Code != 400 || got.Body.String() != want {
		t.Errorf("force_complete of another id: %d %s\nwant %s", got.Code, got.Body, want)
	}
	if got = a.do("POST", "/v2.1/servers/"+onOne+"/migrations/"+id+"/action", force, admin, mv("2.22")); got.Code != 202 {
		t.Errorf("force_complete: %d %s", got.Code, got.Body)
	}
	if got = a.do("POST", "/v2.1/servers/"+onOne+"/migrations/"+id+"/action", force, admin, mv("2.21")); got.Code != 404 {
		t.Errorf("force_complete before 2.22: %d %s", got.Code, got.Body)
	}
}
