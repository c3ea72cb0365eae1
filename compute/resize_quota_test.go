package compute

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/servers"
)

// activeServers makes n ACTIVE m1.tiny servers of project race (user
// u), each holding its flavor in Placement as a scheduled server does.
func activeServers(t *testing.T, a *testAPI, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		res, err := a.api.servers.Create(ctx, servers.CreateRequest{Name: fmt.Sprintf("r%d", i), Flavor: tiny, Count: 1,
			ProjectID: "race", UserID: "u", RequestID: "req-test"})
		if err != nil {
			t.Fatal(err)
		}
		id := res.BuildRequests[0].InstanceUUID
		a.place(id, "host1", etcdschema.StatusActive, time.Now().UTC(), nil)
		if _, err := a.cli.Put(ctx, a.keys.Consumer(id), etcdschema.MustEncode(&etcdschema.Consumer{UUID: id, ProjectID: "race",
			UserID: "u", Allocations: map[string]etcdschema.ConsumerAllocation{"rp1": {Resources: map[string]int64{
				"VCPU": int64(tiny.VCPUs), "MEMORY_MB": int64(tiny.RAMMB), "DISK_GB": int64(tiny.DiskGB)}}}})); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func setRaceQuota(t *testing.T, a *testAPI, set string) {
	t.Helper()
	if got := a.do("PUT", "/v2.1/os-quota-sets/race", `{"quota_set": {`+set+`}}`, "X-Auth-Token: admin:ops"); got.Code != 200 {
		t.Fatalf("quota set: %d %s", got.Code, got.Body)
	}
}

// TestResizeOverQuota: an upsize past the project's cores is Nova's 403
// in _check_quota_for_upsize's words; a downsize is not checked.
func TestResizeOverQuota(t *testing.T) {
	a := newTestAPI(t)
	ids := activeServers(t, a, 4)
	setRaceQuota(t, a, `"cores": 4, "ram": -1, "instances": -1`)
	got := a.do("POST", "/v2.1/servers/"+ids[0]+"/action", `{"resize": {"flavorRef": "3"}}`, "X-Auth-Token: u:race")
	want := `{"forbidden": {"code": 403, "message": "Quota exceeded for cores: Requested 1, but already used 4 of 4 cores"}}`
	if got.Code != 403 || got.Body.String() != want {
		t.Errorf("resize over quota: %d %s\nwant 403 %s", got.Code, got.Body, want)
	}
	// m1.small has the same cores and more RAM, which is unlimited.
	if got := a.do("POST", "/v2.1/servers/"+ids[0]+"/action", `{"resize": {"flavorRef": "2"}}`, "X-Auth-Token: u:race"); got.Code != 202 {
		t.Errorf("resize within quota: %d %s", got.Code, got.Body)
	}
}

// TestResizeQuotaRace: resizes at once at the project's limit. A resize
// in flight counts its old and new flavors (both are held in Placement
// once it is scheduled), so of four upsizes with one core of room exactly
// one goes in, and the rest are refused in Nova's words counting it.
func TestResizeQuotaRace(t *testing.T) {
	a := newTestAPI(t)
	ids := activeServers(t, a, 4)
	setRaceQuota(t, a, `"cores": 6, "ram": -1, "instances": -1`)
	codes := make([]int, len(ids))
	bodies := make([]string, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := a.do("POST", "/v2.1/servers/"+id+"/action", `{"resize": {"flavorRef": "3"}}`, "X-Auth-Token: u:race")
			codes[i], bodies[i] = got.Code, got.Body.String()
		}()
	}
	wg.Wait()
	accepted := 0
	for i, code := range codes {
		switch code {
		case 202:
			accepted++
		case 403:
			want := `{"forbidden": {"code": 403, "message": "Quota exceeded for cores: Requested 1, but already used 6 of 6 cores"}}`
			if bodies[i] != want {
				t.Errorf("refusal %d: %s\nwant %s", i, bodies[i], want)
			}
		default:
			t.Errorf("resize %d: %d %s", i, code, bodies[i])
		}
	}
	if accepted != 1 {
		t.Errorf("%d resizes accepted, want exactly 1 (codes %v)", accepted, codes)
	}
	// A create now sees the resize's room taken.
	a.api.SetImages(testImages{novaCirros: {ID: novaCirros, Name: "cirros"}})
	got := a.do("POST", "/v2.1/servers", `{"server": {"name": "x", "flavorRef": "1", "imageRef": "`+novaCirros+`", "networks": "none"}}`,
		"X-Auth-Token: u:race", "OpenStack-API-Version: compute 2.64")
	if got.Code != 403 {
		t.Errorf("create after the resize: %d %s, want 403", got.Code, got.Body)
	}
}

// TestRevertOverQuota: reverting a downsize is checked as an upsize back
// to the old flavor (Nova's revert_resize: "If this is a resize down, a
// revert might go over quota"), counting both flavors the move holds.
func TestRevertOverQuota(t *testing.T) {
	a := newTestAPI(t)
	id := activeServers(t, a, 1)[0]
	ctx := context.Background()
	medium := etcdschema.Flavor{ID: "3", Name: "m1.medium", VCPUs: 2, RAMMB: 4096, DiskGB: 40}
	// Resized down from m1.medium to m1.tiny, waiting for confirm: the
	// source (medium) under the migration, the destination (tiny) under
	// the instance.
	resp, err := a.cli.Get(ctx, a.keys.CellInstance("cell1", id))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("instance: %v", err)
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &in); err != nil {
		t.Fatal(err)
	}
	mig := etcdschema.Migration{UUID: "22222222-2222-4222-8222-222222222222", InstanceUUID: id, Cell: "cell1",
		ProjectID: "race", UserID: "u", MigrationType: etcdschema.MigrationTypeResize, Status: etcdschema.MigrationFinished,
		SourceHost: "host0", SourceNode: "host0", DestHost: "host1", DestNode: "host1", OldFlavor: medium, NewFlavor: tiny}
	in.Status, in.MigrationUUID = etcdschema.StatusVerifyResize, mig.UUID
	for key, v := range map[string]etcdschema.Versioned{
		a.keys.CellInstance("cell1", id):    &in,
		a.keys.Migration("cell1", mig.UUID): &mig,
		a.keys.Consumer(mig.UUID): &etcdschema.Consumer{UUID: mig.UUID, ProjectID: "race", UserID: "u",
			Allocations: map[string]etcdschema.ConsumerAllocation{"rp0": {Resources: map[string]int64{"VCPU": 2, "MEMORY_MB": 4096}}}},
	} {
		if _, err := a.cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	// Written by hand, not by the resize's guarded start, which charges
	// the project's quota usage record with the move's hold: set the
	// record from a count, as that start would have left it.
	if ok, err := quotas.New(a.cli, a.keys, nil, nil).RepairUsage(ctx, "race", "test"); err != nil || !ok {
		t.Fatalf("set the usage record: %v %v", ok, err)
	}
	setRaceQuota(t, a, `"cores": 3, "ram": -1, "instances": -1`)
	got := a.do("POST", "/v2.1/servers/"+id+"/action", `{"revertResize": null}`, "X-Auth-Token: u:race")
	want := `{"forbidden": {"code": 403, "message": "Quota exceeded for cores: Requested 1, but already used 3 of 3 cores"}}`
	if got.Code != 403 || got.Body.String() != want {
		t.Errorf("revert over quota: %d %s\nwant 403 %s", got.Code, got.Body, want)
	}
	setRaceQuota(t, a, `"cores": 4`)
	if got := a.do("POST", "/v2.1/servers/"+id+"/action", `{"revertResize": null}`, "X-Auth-Token: u:race"); got.Code != 202 {
		t.Errorf("revert within quota: %d %s", got.Code, got.Body)
	}
}

// TestResizeAndCreateQuotaRace: resizes and creates at once at the
// project's cores limit never take more than it, once every accepted
// resize is confirmed: each was checked against a count that included
// every other accepted one.
func TestResizeAndCreateQuotaRace(t *testing.T) {
	a := newTestAPI(t)
	a.api.SetImages(testImages{novaCirros: {ID: novaCirros, Name: "cirros"}})
	ids := activeServers(t, a, 4)
	setRaceQuota(t, a, `"cores": 6, "ram": -1, "instances": -1`)
	const creates = 4
	codes := make([]int, len(ids)+creates)
	bodies := make([]string, len(codes))
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got *httptest.ResponseRecorder
			if i < len(ids) {
				got = a.do("POST", "/v2.1/servers/"+ids[i]+"/action", `{"resize": {"flavorRef": "3"}}`, "X-Auth-Token: u:race")
			} else {
				got = a.do("POST", "/v2.1/servers", `{"server": {"name": "x", "flavorRef": "1", "imageRef": "`+novaCirros+`", "networks": "none"}}`,
					"X-Auth-Token: u:race", "OpenStack-API-Version: compute 2.64")
			}
			codes[i], bodies[i] = got.Code, got.Body.String()
		}()
	}
	wg.Wait()
	resized, created := 0, 0
	for i, code := range codes {
		switch {
		case code == 202 && i < len(ids):
			resized++
		case code == 202:
			created++
		case code == 403 && strings.Contains(bodies[i], "Quota exceeded for cores: Requested 1, but already used "):
		default:
			t.Errorf("request %d: %d %s", i, code, bodies[i])
		}
	}
	t.Logf("%d resizes and %d creates accepted", resized, created)
	// Confirmed, each resize takes one more core, each create one.
	if used := 4 + resized + created; used > 6 || resized+created == 0 {
		t.Errorf("%d resizes and %d creates accepted: %d cores once confirmed, limit 6", resized, created, used)
	}
}
