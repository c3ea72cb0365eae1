package compute

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/quotas"
)

// put writes v at key or fails the test.
func (h *hostsAPI) put(key string, v etcdschema.Versioned) {
	h.t.Helper()
	if _, err := h.cli.Put(context.Background(), key, etcdschema.MustEncode(v)); err != nil {
		h.t.Fatal(err)
	}
}

// TestAggregateCasesNovaLeftUnrecorded: the answers the recording could
// not reach with Nova's fake driver and no servers (a zone with servers
// on its hosts) and Berth's own upgrade path (a record from before ids).
func TestAggregateCasesNovaLeftUnrecorded(t *testing.T) {
	h := newHostsAPI(t, "compute-1")
	old := &etcdschema.Aggregate{UUID: "0c6f3e2a-9d1b-4f8e-8a5c-7b2d4e6f1a90", Name: "old", Hosts: []string{},
		Metadata: map[string]string{}, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h.put(h.keys.Aggregate(old.UUID), old)
	h.expect(h.do("GET", "/v2.1/os-aggregates/1", "", mv("2.41")), 200,
		`{"aggregate": {"id": 1, "uuid": "0c6f3e2a-9d1b-4f8e-8a5c-7b2d4e6f1a90", "name": "old", "hosts": [], "metadata": {}, `+
			`"created_at": "2026-01-02T03:04:05.000000", "updated_at": null, "deleted_at": null, "deleted": false, "availability_zone": null}}`)
	if rec := h.do("POST", "/v2.1/os-aggregates", `{"aggregate": {"name": "z", "availability_zone": "az1"}}`); !strings.Contains(rec.Body.String(), `"id": 2,`) {
		t.Fatalf("create after an old record: %d %s", rec.Code, rec.Body)
	}
	// Adding a host leaves updated_at, as Nova's aggregate_hosts rows do.
	if rec := h.do("POST", "/v2.1/os-aggregates/2/action", `{"add_host": {"host": "compute-1"}}`); rec.Code != 200 ||
		!strings.Contains(rec.Body.String(), `"hosts": ["compute-1"], "metadata": {"availability_zone": "az1"}`) ||
		!strings.Contains(rec.Body.String(), `"updated_at": null`) {
		t.Fatalf("add_host: %d %s", rec.Code, rec.Body)
	}
	h.put(h.keys.HostInstance("compute-1", "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"), &etcdschema.InstanceInfo{})
	cases := []struct {
		desc, method, path, body string
		status                   int
		message                  string
	}{
		{"rename a zone with servers", "PUT", "/v2.1/os-aggregates/2", `{"aggregate": {"availability_zone": "az2"}}`, 400,
			"Cannot update aggregate 2. Reason: One or more hosts contain instances in this zone."},
		{"move it by metadata", "POST", "/v2.1/os-aggregates/2/action", `{"set_metadata": {"metadata": {"availability_zone": "az2"}}}`, 400,
			"Cannot update metadata of aggregate 2. Reason: One or more hosts contain instances in this zone."},
		{"the same zone is no change", "PUT", "/v2.1/os-aggregates/2", `{"aggregate": {"availability_zone": "az1"}}`, 200, ""},
		{"past int64 is no aggregate", "GET", "/v2.1/os-aggregates/99999999999999999999", "", 404,
			"Aggregate 99999999999999999999 could not be found."},
	}
	for _, c := range cases {
		rec := h.do(c.method, c.path, c.body)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.message) {
			t.Errorf("%s: %d %s, want %d %q", c.desc, rec.Code, rec.Body, c.status, c.message)
		}
	}
}

// TestServerGroupMembersAndUsage: a group shows the members whose server
// exists; limits count the caller's project's servers (build requests
// and cell instances, not deleted ones) and groups, never another
// project's, which does not see the group either.
func TestServerGroupMembersAndUsage(t *testing.T) {
	const p1, p2 = "X-Auth-Token: alice:p1", "X-Auth-Token: bob:p2"
	h := newHostsAPI(t)
	rec := h.do("POST", "/v2.1/os-server-groups", `{"server_group": {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}}`, mv("2.64"), p1)
	if rec.Code != 200 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	id := strings.Split(strings.Split(rec.Body.String(), `"id": "`)[1], `"`)[0]
	small := etcdschema.Flavor{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048}
	large := etcdschema.Flavor{ID: "4", Name: "m1.large", VCPUs: 4, RAMMB: 8192}
	servers := []struct {
		uuid, cell, project, status string
		flavor                      etcdschema.Flavor
	}{
		{"11111111-1111-4111-8111-111111111111", "", "p1", "", small},                           // a build request
		{"22222222-2222-4222-8222-222222222222", "cell1", "p1", etcdschema.StatusActive, large}, // in its cell
		{"33333333-3333-4333-8333-333333333333", "cell1", "p1", etcdschema.StatusDeleted, large},
		{"44444444-4444-4444-8444-444444444444", "cell1", "p2", etcdschema.StatusActive, small}, // another project's
	}
	for _, s := range servers {
		h.put(h.keys.InstanceMapping(s.uuid), &etcdschema.InstanceMapping{InstanceUUID: s.uuid, Cell: s.cell, ProjectID: s.project})
		if s.cell == "" {
			h.put(h.keys.BuildRequest(s.uuid), &etcdschema.BuildRequest{InstanceUUID: s.uuid, Flavor: s.flavor, ProjectID: s.project})
		} else {
			h.put(h.keys.CellInstance(s.cell, s.uuid), &etcdschema.Instance{UUID: s.uuid, Cell: s.cell, Flavor: s.flavor,
				ProjectID: s.project, Status: s.status})
			if s.status == etcdschema.StatusActive { // its claim: cores and RAM count from Placement
				h.put(h.keys.Consumer(s.uuid), &etcdschema.Consumer{UUID: s.uuid, ProjectID: s.project,
					Allocations: map[string]etcdschema.ConsumerAllocation{"rp1": {Resources: map[string]int64{
						"VCPU": int64(s.flavor.VCPUs), "MEMORY_MB": int64(s.flavor.RAMMB)}}}})
			}
		}
		h.put(h.keys.ServerGroupMember(id, s.uuid), &etcdschema.ServerGroupMember{InstanceUUID: s.uuid})
	}
	// A server of no project (written before callers had one) is nobody's.
	h.put(h.keys.InstanceMapping("66666666-6666-4666-8666-666666666666"), &etcdschema.InstanceMapping{
		InstanceUUID: "66666666-6666-4666-8666-666666666666", Cell: "cell1"})
	h.put(h.keys.CellInstance("cell1", "66666666-6666-4666-8666-666666666666"), &etcdschema.Instance{
		UUID: "66666666-6666-4666-8666-666666666666", Cell: "cell1", Flavor: small, Status: etcdschema.StatusActive})
	h.put(h.keys.ServerGroupMember(id, "55555555-5555-4555-8555-555555555555"), &etcdschema.ServerGroupMember{}) // no server
	group := `{"server_group": {"id": "` + id + `", "name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}, ` +
		`"members": ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", ` +
		`"33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"], "project_id": "p1", "user_id": "alice"}}`
	h.expect(h.do("GET", "/v2.1/os-server-groups/"+id, "", mv("2.64"), p1), 200, group)

	for _, c := range []struct {
		project string
		want    quotas.Usage
	}{
		{"p1", quotas.Usage{Instances: 2, Cores: 5, RAM: 10240, ServerGroups: 1}},
		{"p2", quotas.Usage{Instances: 1, Cores: 1, RAM: 2048}},
		{"", quotas.Usage{}}, // no project uses nothing, not every project's
	} {
		got, _, err := h.nova.quotas.Count(context.Background(), c.project, "")
		if err != nil || got != c.want {
			t.Errorf("usage of %q: %+v %v, want %+v", c.project, got, err, c.want)
		}
	}
	limits := func(ram, cores, instances, groups string) string {
		return `{"limits": {"rate": [], "absolute": {"maxTotalInstances": 10, "maxTotalCores": 20, "maxTotalRAMSize": 51200, ` +
			`"maxServerMeta": 128, "maxTotalKeypairs": 100, "maxServerGroups": 10, "maxServerGroupMembers": 10, ` +
			`"totalRAMUsed": ` + ram + `, "totalCoresUsed": ` + cores + `, "totalInstancesUsed": ` + instances +
			`, "totalServerGroupsUsed": ` + groups + `}}}`
	}
	for _, c := range []struct {
		desc, path, token, want string
	}{
		{"p1 counts its own, not p2's server", "/v2.1/limits", p1, limits("10240", "5", "2", "1")},
		{"p2 counts its server, not p1's group", "/v2.1/limits", p2, limits("2048", "1", "1", "0")},
		{"an admin's own project uses nothing here", "/v2.1/limits", "X-Auth-Token: admin:ops", limits("0", "0", "0", "0")},
		{"an admin asks for p1's", "/v2.1/limits?tenant_id=p1", "X-Auth-Token: admin:ops", limits("10240", "5", "2", "1")},
	} {
		rec := h.do("GET", c.path, "", mv("2.57"), c.token)
		if rec.Code != 200 || rec.Body.String() != c.want {
			t.Errorf("%s: %d %s\nwant 200 %s", c.desc, rec.Code, rec.Body, c.want)
		}
	}

	// Another project neither lists nor finds the group (Nova's lookup
	// filters by project for a non-admin: 404, not 403).
	h.expect(h.do("GET", "/v2.1/os-server-groups", "", mv("2.64"), p2), 200, `{"server_groups": []}`)
	h.expect(h.do("GET", "/v2.1/os-server-groups?all_projects", "", mv("2.64"), p2), 200, `{"server_groups": []}`)
	h.expect(h.do("GET", "/v2.1/os-server-groups/"+id, "", mv("2.64"), p2), 404,
		`{"itemNotFound": {"code": 404, "message": "Instance group `+id+` could not be found."}}`)
	h.expect(h.do("DELETE", "/v2.1/os-server-groups/"+id, "", p2), 404,
		`{"itemNotFound": {"code": 404, "message": "Instance group `+id+` could not be found."}}`)
	h.expect(h.do("GET", "/v2.1/os-server-groups", "", mv("2.64"), p1), 200, `{"server_groups": [`+
		strings.TrimSuffix(strings.TrimPrefix(group, `{"server_group": `), "}")+`]}`)
	h.expect(h.do("GET", "/v2.1/os-server-groups?all_projects", "", mv("2.64"), "X-Auth-Token: admin:ops"), 200, `{"server_groups": [`+
		strings.TrimSuffix(strings.TrimPrefix(group, `{"server_group": `), "}")+`]}`)
}

// TestGroupsProjectFilter: all_projects is an admin's; anyone else lists
// their project's groups; a caller without a project lists none, not
// every group nor the groups of no project.
func TestGroupsProjectFilter(t *testing.T) {
	a := New(nil, etcdschema.New("/t"), nil)
	member := []string{identity.RoleMember, identity.RoleReader}
	admin := []string{identity.RoleAdmin, identity.RoleMember, identity.RoleReader}
	groups := []*etcdschema.ServerGroup{{UUID: "of-p1", ProjectID: "p1"}, {UUID: "of-p2", ProjectID: "p2"}, {UUID: "of-none"}}
	cases := []struct {
		desc  string
		creds identity.Credentials
		all   bool
		want  string // the groups listed
	}{
		{"member", identity.Credentials{ProjectID: "p1", Roles: member}, false, "of-p1"},
		{"member asking all_projects", identity.Credentials{ProjectID: "p1", Roles: member}, true, "of-p1"},
		{"admin", identity.Credentials{ProjectID: "p1", Roles: admin}, false, "of-p1"},
		{"admin asking all_projects", identity.Credentials{ProjectID: "p1", Roles: admin}, true, "of-p1 of-p2 of-none"},
		{"no project", identity.Credentials{Roles: member}, false, ""},
		{"admin of no project", identity.Credentials{Roles: admin}, false, ""},
	}
	for _, c := range cases {
		filter, f := groupsProjectFilter(&reqCtx{creds: c.creds, api: a}, c.all)
		var listed []string
		for _, g := range groups {
			if filter.lists(g) {
				listed = append(listed, g.UUID)
			}
		}
		if got := strings.Join(listed, " "); f != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.desc, got, f, c.want)
		}
	}
}
