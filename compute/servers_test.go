package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

var tiny = etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512, DiskGB: 1}

// request stores a build request as a create does, at created.
func (a *testAPI) request(name, project string, created time.Time, hints etcdschema.SchedulerHints) string {
	a.t.Helper()
	res, err := a.api.servers.Create(context.Background(), servers.CreateRequest{Name: name, Flavor: tiny, Count: 1,
		ProjectID: project, UserID: "u-" + project, Hints: hints, RequestID: "req-test"})
	if err != nil {
		a.t.Fatal(err)
	}
	br := res.BuildRequests[0]
	br.CreatedAt = created
	if _, err := a.cli.Put(context.Background(), a.keys.BuildRequest(br.InstanceUUID), etcdschema.MustEncode(br)); err != nil {
		a.t.Fatal(err)
	}
	return br.InstanceUUID
}

// place does the superconductor's hand-off of a build request to host
// in cell1, with the instance in status (and fault, for ERROR).
func (a *testAPI) place(id, host, status string, updated time.Time, fault *etcdschema.Fault) {
	a.t.Helper()
	ctx := context.Background()
	resp, err := a.cli.Get(ctx, a.keys.BuildRequest(id))
	if err != nil || len(resp.Kvs) != 1 {
		a.t.Fatalf("build request %s: %v", id, err)
	}
	var br etcdschema.BuildRequest
	if err := etcdschema.Decode(a.keys.BuildRequest(id), resp.Kvs[0].Value, &br); err != nil {
		a.t.Fatal(err)
	}
	cell := "cell1"
	if host == "" {
		cell = etcdschema.Cell0
	}
	az := br.AvailabilityZone // cell0's: the one asked for
	if host != "" {
		az = "nova"
	}
	in := &etcdschema.Instance{UUID: id, Name: br.Name, Status: status, Host: host, Node: host, Cell: cell,
		Flavor: br.Flavor, ProjectID: br.ProjectID, UserID: br.UserID, AvailabilityZone: az, Attempts: 1,
		CreatedAt: br.CreatedAt, UpdatedAt: updated, Fault: fault}
	br.CarryTo(in)
	m := &etcdschema.InstanceMapping{InstanceUUID: id, Cell: cell, ProjectID: br.ProjectID, CreatedAt: br.CreatedAt}
	if _, err := a.cli.Txn(ctx).Then(clientv3.OpPut(a.keys.CellInstance(cell, id), etcdschema.MustEncode(in)),
		clientv3.OpPut(a.keys.InstanceMapping(id), etcdschema.MustEncode(m)),
		clientv3.OpDelete(a.keys.BuildRequest(id))).Commit(); err != nil {
		a.t.Fatal(err)
	}
}

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// The show view of a server still a build request, and of one ACTIVE on
// a host, member for member as Nova's ViewBuilder.show writes them.
func TestServerShowView(t *testing.T) {
	a := newTestAPI(t)
	id := a.request("web 1", "p1", t0, etcdschema.SchedulerHints{})
	links := fmt.Sprintf(`[{"rel": "self", "href": "http://nova.test:8774/v2.1/servers/%s"}, {"rel": "bookmark", "href": "http://nova.test:8774/servers/%s"}]`, id, id)
	flavorLink := `{"id": "1", "links": [{"rel": "bookmark", "href": "http://nova.test:8774/flavors/1"}]}`
	rec := a.do("GET", "/v2.1/servers/"+id, "")
	a.expect(rec, 200, `{"server": {"id": "`+id+`", "name": "web 1", "status": "BUILD", "tenant_id": "p1", "user_id": "u-p1", `+
		`"metadata": {}, "hostId": "", "image": "", "flavor": `+flavorLink+`, "created": "2026-11-26T10:00:00Z", `+
		`"updated": "2026-11-26T10:00:00Z", "addresses": {}, "accessIPv4": "", "accessIPv6": "", "links": `+links+`, `+
		`"OS-DCF:diskConfig": "MANUAL", "progress": 0, "OS-EXT-AZ:availability_zone": "", "config_drive": "", "key_name": null, `+
		`"OS-SRV-USG:launched_at": null, "OS-SRV-USG:terminated_at": null, "OS-EXT-SRV-ATTR:host": null, `+
		`"OS-EXT-SRV-ATTR:instance_name": "", "OS-EXT-SRV-ATTR:hypervisor_hostname": null, "OS-EXT-STS:task_state": "scheduling", `+
		`"OS-EXT-STS:vm_state": "building", "OS-EXT-STS:power_state": 0, "os-extended-volumes:volumes_attached": []}}`)

	a.place(id, "compute-1", etcdschema.StatusActive, t0.Add(90*time.Second+500*time.Millisecond), nil)
	hid := hostID("compute-1", "p1")
	rec = a.do("GET", "/v2.1/servers/"+id, "", mv("2.93"))
	a.expect(rec, 200, `{"server": {"id": "`+id+`", "name": "web 1", "status": "ACTIVE", "tenant_id": "p1", "user_id": "u-p1", `+
		`"metadata": {}, "hostId": "`+hid+`", "image": "", "flavor": {"vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0, `+
		`"original_name": "m1.tiny", "extra_specs": {}}, "created": "2026-11-26T10:00:00Z", "updated": "2026-11-26T10:01:30Z", `+
		`"addresses": {}, "accessIPv4": "", "accessIPv6": "", "links": `+links+`, "OS-DCF:diskConfig": "MANUAL", "progress": 0, `+
		`"OS-EXT-AZ:availability_zone": "nova", "config_drive": "", "key_name": null, `+
		`"OS-SRV-USG:launched_at": "2026-11-26T10:01:30.500000", "OS-SRV-USG:terminated_at": null, `+
		`"OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-SRV-ATTR:instance_name": "instance-`+strings.ReplaceAll(id, "-", "")[:8]+`", `+
		`"OS-EXT-SRV-ATTR:hypervisor_hostname": "compute-1", "OS-EXT-SRV-ATTR:reservation_id": "`+reservationOf(t, a, id)+`", `+
		`"OS-EXT-SRV-ATTR:launch_index": 0, "OS-EXT-SRV-ATTR:hostname": "web-1", "OS-EXT-SRV-ATTR:kernel_id": "", `+
		`"OS-EXT-SRV-ATTR:ramdisk_id": "", "OS-EXT-SRV-ATTR:root_device_name": "/dev/sda", "OS-EXT-SRV-ATTR:user_data": null, `+
		`"OS-EXT-STS:task_state": null, "OS-EXT-STS:vm_state": "active", "OS-EXT-STS:power_state": 1, `+
		`"os-extended-volumes:volumes_attached": [], "host_status": "", "locked": false, "locked_reason": null, `+
		`"description": null, "tags": [], "trusted_image_certificates": null, "server_groups": []}}`)

	a.expect(a.do("GET", "/v2.1/servers/"+strings.Repeat("0", 8), ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Instance 00000000 could not be found."}}`)
}

func reservationOf(t *testing.T, a *testAPI, id string) string {
	t.Helper()
	v, err := a.api.servers.Lookup(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v.Instance.ReservationID
}

// An ERROR server shows its fault: the details of a 500 for admins.
func TestServerShowFault(t *testing.T) {
	a := newTestAPI(t)
	id := a.request("bad", "p1", t0, etcdschema.SchedulerHints{})
	a.place(id, "", etcdschema.StatusError, t0.Add(time.Minute), &etcdschema.Fault{Code: 500,
		Message: "No valid host was found. ", Details: "compute-1: not enough RAM", Created: t0.Add(time.Minute)})
	var out struct {
		Server map[string]any `json:"server"`
	}
	rec := a.do("GET", "/v2.1/servers/"+id, "", mv("2.73"))
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	fault, _ := json.Marshal(out.Server["fault"])
	if string(fault) != `{"code":500,"created":"2026-11-26T10:01:00Z","details":"compute-1: not enough RAM","message":"No valid host was found. "}` {
		t.Errorf("fault: %s", fault)
	}
	if out.Server["status"] != "ERROR" || out.Server["OS-EXT-STS:vm_state"] != "error" || out.Server["progress"] != nil {
		t.Errorf("server: %v", out.Server)
	}
	if !strings.Contains(rec.Body.String(), `"message": "No valid host was found. ", "details"`) {
		t.Errorf("fault members out of Nova's order: %s", rec.Body)
	}
}

// listNames lists with query q at version v as the caller token and
// returns the names, in order, and the body.
func (a *testAPI) listNames(path, v, token string) ([]string, string) {
	a.t.Helper()
	rec := a.do("GET", path, "", mv(v), "X-Auth-Token: "+token)
	if rec.Code != http.StatusOK {
		a.t.Fatalf("GET %s (%s): %d %s", path, v, rec.Code, rec.Body)
	}
	var out struct {
		Servers []struct{ Name string } `json:"servers"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		a.t.Fatal(err)
	}
	names := []string{}
	for _, s := range out.Servers {
		names = append(names, s.Name)
	}
	return names, rec.Body.String()
}

// The list filters and sorts as Nova's _get_servers and get_all: build
// requests first, created_at desc by default, each filter as Nova reads
// it, and a status filter never widens to every server.
func TestServerListFilters(t *testing.T) {
	a := newTestAPI(t)
	ids := map[string]string{}
	for i, n := range []string{"alpha", "beta", "gamma", "delta", "epsilon"} {
		ids[n] = a.request(n, []string{"p1", "p1", "p1", "p1", "p2"}[i], t0.Add(time.Duration(i)*time.Minute), etcdschema.SchedulerHints{})
	}
	a.place(ids["epsilon"], "compute-1", etcdschema.StatusActive, t0.Add(13*time.Minute), nil)
	a.place(ids["alpha"], "compute-1", etcdschema.StatusActive, t0.Add(10*time.Minute), nil)
	a.place(ids["beta"], "compute-2", etcdschema.StatusActive, t0.Add(11*time.Minute), nil)
	a.place(ids["gamma"], "", etcdschema.StatusError, t0.Add(12*time.Minute), &etcdschema.Fault{Code: 500, Message: "No valid host was found. "})
	// delta stays a build request. The caller is an admin of p1: without
	// all_tenants it lists p1's servers only, never p2's epsilon.
	cases := []struct {
		desc, query, version string
		want                 string
	}{
		{"default order: build requests, then created_at desc", "", "2.1", "delta,gamma,beta,alpha"},
		{"name is a regex, without case", "?name=^ALP|mm", "2.1", "gamma,alpha"},
		{"status ACTIVE", "?status=ACTIVE", "2.1", "beta,alpha"},
		{"status ERROR is the ERROR ones only", "?status=ERROR", "2.93", "gamma"},
		{"status BUILD", "?status=build", "2.93", "delta"},
		{"two statuses", "?status=ERROR&status=BUILD", "2.93", "delta,gamma"},
		{"a status Berth never reaches", "?status=SHUTOFF", "2.93", ""},
		{"an unknown status before 2.38: nothing", "?status=NOPE", "2.37", ""},
		{"host (admin)", "?host=compute-2", "2.1", "beta"},
		{"node regex", "?node=compute", "2.1", "beta,alpha"},
		{"flavor", "?flavor=1", "2.1", "delta,gamma,beta,alpha"},
		{"an unknown flavor: empty", "?flavor=42", "2.1", ""},
		{"project (with all_tenants)", "?all_tenants=1&project_id=p2", "2.1", "epsilon"},
		{"all_tenants: every project's", "?all_tenants=1&status=ACTIVE", "2.1", "epsilon,beta,alpha"},
		{"tenant_id ignored without all_tenants", "?tenant_id=p2", "2.1", "delta,gamma,beta,alpha"},
		{"changes-since: updated at or after", "?changes-since=2026-11-26T10:10:30Z", "2.1", "gamma,beta"},
		{"changes-before: updated at or before", "?changes-before=2026-11-26T10:11:00Z", "2.66", "delta,beta,alpha"},
		{"sort by name asc", "?sort_key=display_name&sort_dir=asc", "2.1", "delta,alpha,beta,gamma"},
		// Nova drops the key with its direction; the database's defaults
		// are then created_at and id ascending.
		{"an ignored sort key before 2.75", "?sort_key=vcpus", "2.1", "delta,alpha,beta,gamma"},
		{"unknown parameters stripped before 2.75", "?foo=bar", "2.74", "delta,gamma,beta,alpha"},
		{"limit", "?limit=2", "2.1", "delta,gamma"},
		{"marker", "?marker=" + ids["gamma"], "2.1", "beta,alpha"},
		{"tags match nothing", "?tags=x", "2.26", ""},
		{"locked=false matches everything", "?locked=false", "2.73", "delta,gamma,beta,alpha"},
		{"reservation_id", "?reservation_id=" + reservationOf(t, a, ids["beta"]), "2.1", "beta"},
		{"uuid", "?uuid=" + ids["alpha"], "2.1", "alpha"},
	}
	for _, tc := range cases {
		for _, path := range []string{"/v2.1/servers", "/v2.1/servers/detail"} {
			names, body := a.listNames(path+tc.query, tc.version, "admin:p1")
			if got := strings.Join(names, ","); got != tc.want {
				t.Errorf("%s: GET %s%s (%s) = %s, want %s\n%s", tc.desc, path, tc.query, tc.version, got, tc.want, body)
			}
		}
	}
}

// Paging: a full page carries the next link with the last id as marker.
func TestServerListPaging(t *testing.T) {
	a := newTestAPI(t)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, a.request(fmt.Sprintf("s%d", i), "p1", t0.Add(time.Duration(i)*time.Minute), etcdschema.SchedulerHints{}))
	}
	rec := a.do("GET", "/v2.1/servers?limit=2&name=s", "", "X-Auth-Token: alice:p1")
	want := fmt.Sprintf(`, "servers_links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/servers?limit=2&name=s&marker=%s"}]}`, ids[1])
	if !strings.HasSuffix(rec.Body.String(), want) {
		t.Errorf("page 1: %s\nwant suffix %s", rec.Body, want)
	}
	rec = a.do("GET", "/v2.1/servers/detail?limit=2&marker="+ids[1], "", "X-Auth-Token: alice:p1")
	if strings.Contains(rec.Body.String(), "servers_links") || !strings.Contains(rec.Body.String(), ids[0]) {
		t.Errorf("page 2: %s", rec.Body)
	}
}

// Bad queries answer as Nova's schema and _get_servers do.
func TestServerListQueryErrors(t *testing.T) {
	a := newTestAPI(t)
	a.request("x", "p1", t0, etcdschema.SchedulerHints{})
	bad := func(msg string) string { return `{"badRequest": {"code": 400, "message": "` + msg + `"}}` }
	cases := []struct {
		desc, query, version string
		status               int
		body                 string
	}{
		{"unknown status from 2.38", "?status=NOPE", "2.38", 400, bad("Invalid status value")},
		{"empty regex", "?name=", "2.1", 400, bad("Invalid input for query parameters name. Value: . '' is not a 'regex'")},
		{"bad regex", "?name=(", "2.1", 400, bad("Invalid input for query parameters name. Value: (. '(' is not a 'regex'")},
		{"bad changes-since", "?changes-since=yesterday", "2.1", 400,
			bad("Invalid input for query parameters changes-since. Value: yesterday. 'yesterday' is not a 'date-time'")},
		{"changes-before before changes-since", "?changes-since=2026-01-02&changes-before=2026-01-01", "2.66", 400,
			bad("The value of changes-since must be less than or equal to changes-before.")},
		{"negative limit", "?limit=-1", "2.1", 400,
			bad("Invalid input for query parameters limit. Value: -1. '-1' does not match '^[0-9]*$'")},
		{"joined-table filter", "?metadata=x", "2.1", 400, bad("Invalid filter field: metadata.")},
		{"underscore filter", "?_secret=x", "2.1", 400, bad("Invalid filter field: _secret.")},
		{"unknown parameter from 2.75", "?foo=bar", "2.75", 400,
			bad(`'foo' does not match any of the regexes: '^_'`)},
		{"ignored sort key refused from 2.75", "?sort_key=vcpus", "2.75", 400, ""},
		{"bad sort dir", "?sort_key=display_name&sort_dir=up", "2.1", 400,
			bad("Invalid input received: Unknown sort direction, must be 'desc' or 'asc'")},
		{"unknown marker", "?marker=nope", "2.1", 400, bad("marker [nope] not found")},
		{"bad all_tenants", "?all_tenants=maybe", "2.1", 400, ""},
	}
	for _, tc := range cases {
		rec := a.do("GET", "/v2.1/servers"+tc.query, "", mv(tc.version))
		if rec.Code != tc.status || tc.body != "" && rec.Body.String() != tc.body {
			t.Errorf("%s: %d %s\nwant %d %s", tc.desc, rec.Code, rec.Body, tc.status, tc.body)
		}
	}
}

// Delete answers 204 and the server is gone; a second delete is Nova's 404.
func TestServerDelete(t *testing.T) {
	a := newTestAPI(t)
	id := a.request("x", "p1", t0, etcdschema.SchedulerHints{})
	// Nova's database matches a uuid in any case; Berth's keys have one.
	if rec := a.do("GET", "/v2.1/servers/"+strings.ToUpper(id), ""); rec.Code != http.StatusOK {
		t.Errorf("show by the upper-case uuid: %d %s", rec.Code, rec.Body)
	}
	a.expect(a.do("GET", "/v2.1/servers/..", ""), 404, `{"itemNotFound": {"code": 404, "message": "Instance .. could not be found."}}`)
	if rec := a.do("DELETE", "/v2.1/servers/"+id, ""); rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	a.expect(a.do("DELETE", "/v2.1/servers/"+id, ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Instance `+id+` could not be found."}}`)
	a.expect(a.do("GET", "/v2.1/servers/"+id, ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Instance `+id+` could not be found."}}`)
}
