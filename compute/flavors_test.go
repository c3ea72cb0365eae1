package compute

import (
	"strings"
	"testing"
)

// small is m1.small's detailed view at 2.1, before the microversions
// that change it.
const smallLinks = `"links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/flavors/2"}, {"rel": "bookmark", "href": "http://nova.test:8774/flavors/2"}]`

func smallView(swap string) string {
	return `"id": "2", "name": "m1.small", "ram": 2048, "disk": 20, "swap": ` + swap + `, "OS-FLV-EXT-DATA:ephemeral": 0, ` +
		`"OS-FLV-DISABLED:disabled": false, "vcpus": 1, "os-flavor-access:is_public": true, "rxtx_factor": 1.0, ` + smallLinks
}

func TestShowFlavorPerMicroversion(t *testing.T) {
	a := newTestAPI(t)
	cases := []struct{ version, want string }{
		{"2.1", `{"flavor": {` + smallView(`""`) + `}}`},
		{"2.54", `{"flavor": {` + smallView(`""`) + `}}`},
		{"2.55", `{"flavor": {` + smallView(`""`) + `, "description": null}}`},
		{"2.60", `{"flavor": {` + smallView(`""`) + `, "description": null}}`},
		{"2.61", `{"flavor": {` + smallView(`""`) + `, "description": null, "extra_specs": {}}}`},
		{"2.74", `{"flavor": {` + smallView(`""`) + `, "description": null, "extra_specs": {}}}`},
		{"2.75", `{"flavor": {` + smallView(`0`) + `, "description": null, "extra_specs": {}}}`},
		{"2.93", `{"flavor": {` + smallView(`0`) + `, "description": null, "extra_specs": {}}}`},
	}
	for _, c := range cases {
		t.Run(c.version, func(t *testing.T) {
			a.t = t
			a.expect(a.do("GET", "/v2.1/flavors/2", "", mv(c.version)), 200, c.want)
		})
	}
}

func TestListFlavors(t *testing.T) {
	a := newTestAPI(t)
	link := func(id string) string {
		return `"links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/flavors/` + id + `"}, {"rel": "bookmark", "href": "http://nova.test:8774/flavors/` + id + `"}]`
	}
	brief := func(id, name string) string { return `{"id": "` + id + `", "name": "` + name + `", ` + link(id) + `}` }
	all := []string{brief("1", "m1.tiny"), brief("2", "m1.small"), brief("3", "m1.medium"), brief("4", "m1.large"), brief("5", "m1.xlarge")}
	list := func(items ...string) string { return `{"flavors": [` + strings.Join(items, ", ") + `]}` }
	cases := []struct {
		desc, query, version string
		status               int
		want                 string
	}{
		{desc: "all, by flavorid", status: 200, want: list(all...)},
		{desc: "minRam", query: "?minRam=4096", status: 200, want: list(all[2:]...)},
		{desc: "minDisk", query: "?minDisk=80", status: 200, want: list(all[3:]...)},
		{desc: "sort by memory descending", query: "?sort_key=memory_mb&sort_dir=desc", status: 200,
			want: list(all[4], all[3], all[2], all[1], all[0])},
		{desc: "sort by name", query: "?sort_key=name", status: 200, want: list(all[3], all[2], all[1], all[0], all[4])},
		{desc: "limit pages with a next link", query: "?limit=2", status: 200,
			want: `{"flavors": [` + all[0] + `, ` + all[1] + `], "flavors_links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/flavors?limit=2&marker=2"}]}`},
		{desc: "after a marker", query: "?limit=2&marker=2", status: 200,
			want: `{"flavors": [` + all[2] + `, ` + all[3] + `], "flavors_links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/flavors?limit=2&marker=4"}]}`},
		{desc: "last page is short", query: "?limit=2&marker=4", status: 200, want: list(all[4])},
		{desc: "limit 0", query: "?limit=0", status: 200, want: `{"flavors": []}`},
		{desc: "marker not found", query: "?marker=99", status: 400, want: `{"badRequest": {"code": 400, "message": "marker [99] not found"}}`},
		{desc: "bad limit", query: "?limit=abc", status: 400,
			want: `{"badRequest": {"code": 400, "message": "Invalid input for query parameters limit. Value: abc. 'abc' does not match '^[0-9]*$'"}}`},
		{desc: "bad minRam", query: "?minRam=1.5", status: 400, want: `{"badRequest": {"code": 400, "message": "Invalid minRam filter [1.5]"}}`},
		{desc: "bad is_public", query: "?is_public=maybe", status: 400, want: `{"badRequest": {"code": 400, "message": "Invalid is_public filter [maybe]"}}`},
		{desc: "private only", query: "?is_public=false", status: 200, want: `{"flavors": []}`},
		{desc: "public and private", query: "?is_public=none", status: 200, want: list(all...)},
		{desc: "bad sort key", query: "?sort_key=colour", status: 400,
			want: `{"badRequest": {"code": 400, "message": "Invalid input for query parameters sort_key. Value: colour. 'colour' is not one of ['created_at', 'description', 'disabled', 'ephemeral_gb', 'flavorid', 'id', 'is_public', 'memory_mb', 'name', 'root_gb', 'rxtx_factor', 'swap', 'updated_at', 'vcpu_weight', 'vcpus']"}}`},
		{desc: "unknown parameter ignored before 2.75", query: "?colour=red", version: "2.54", status: 200, want: list(all...)},
		{desc: "unknown parameter refused from 2.75", query: "?colour=red", version: "2.75", status: 400,
			want: `{"badRequest": {"code": 400, "message": "Additional properties are not allowed ('colour' was unexpected)"}}`},
		{desc: "offset stripped before 2.75", query: "?offset=x", status: 200, want: list(all...)},
		{desc: "description from 2.55", query: "?limit=1&marker=4", version: "2.55", status: 200,
			want: `{"flavors": [{"id": "5", "name": "m1.xlarge", ` + link("5") + `, "description": null}], "flavors_links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/flavors?limit=1&marker=5"}]}`},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			a.t = t
			v := c.version
			if v == "" {
				v = "2.1"
			}
			a.expect(a.do("GET", "/v2.1/flavors"+c.query, "", mv(v)), c.status, c.want)
		})
	}
	// OrderedDict(sorted(params)), then the marker: appended when new.
	t.Run("detail", func(t *testing.T) {
		a.t = t
		rec := a.do("GET", "/v2.1/flavors/detail?minRam=2048&limit=1", "", mv("2.75"))
		a.expect(rec, 200, `{"flavors": [{`+smallView("0")+`, "description": null, "extra_specs": {}}], `+
			`"flavors_links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/flavors/detail?limit=1&minRam=2048&marker=2"}]}`)
	})
}

// TestFlavorLifecycle: create (with Nova's defaults and conversions),
// conflicts, the description's PUT, extra specs, access lists, delete;
// and /v1 reads what the Nova API wrote.
func TestFlavorLifecycle(t *testing.T) {
	a := newTestAPI(t)
	links := func(id string) string {
		return `"links": [{"rel": "self", "href": "http://nova.test:8774/v2.1/flavors/` + id + `"}, {"rel": "bookmark", "href": "http://nova.test:8774/flavors/` + id + `"}]`
	}
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "b<i>&g \u00e9", "ram": "1024", "vcpus": 2, "disk": 10, "id": "big", "swap": 512, `+
		`"rxtx_factor": "2.5", "os-flavor-access:is_public": "false", "description": "for <tests>"}}`, mv("2.75")),
		200, `{"flavor": {"id": "big", "name": "b<i>&g \u00e9", "ram": 1024, "disk": 10, "swap": 512, "OS-FLV-EXT-DATA:ephemeral": 0, `+
			`"OS-FLV-DISABLED:disabled": false, "vcpus": 2, "os-flavor-access:is_public": false, "rxtx_factor": 2.5, `+links("big")+`, "description": "for <tests>", "extra_specs": {}}}`)
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "other", "ram": 1, "vcpus": 1, "disk": 0, "id": "big"}}`),
		409, `{"conflictingRequest": {"code": 409, "message": "Flavor with ID big already exists."}}`)
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "m1.tiny", "ram": 1, "vcpus": 1, "disk": 0, "id": 77}}`),
		409, `{"conflictingRequest": {"code": 409, "message": "Flavor with name m1.tiny already exists."}}`)
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "d", "ram": 1, "vcpus": 1, "disk": 0, "description": "x"}}`, mv("2.54")),
		400, `{"badRequest": {"code": 400, "message": "Invalid input for field/attribute flavor. Value: {'name': 'd', 'ram': 1, 'vcpus': 1, 'disk': 0, 'description': 'x'}. Additional properties are not allowed ('description' was unexpected)"}}`)
	// A "/" is printable: Nova takes it (see TestFlavorNameWithSlash).
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "a/b", "ram": 1, "vcpus": 1, "disk": 0, "id": "slash"}}`),
		200, `{"flavor": {"id": "slash", "name": "a/b", "ram": 1, "disk": 0, "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, `+
			`"OS-FLV-DISABLED:disabled": false, "vcpus": 1, "os-flavor-access:is_public": true, "rxtx_factor": 1.0, `+links("slash")+`}}`)
	// A numeric id is str()'d; 2.1 views show swap 0 as "".
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "num", "ram": 1, "vcpus": 1, "disk": 0, "id": 10}}`),
		200, `{"flavor": {"id": "10", "name": "num", "ram": 1, "disk": 0, "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, `+
			`"OS-FLV-DISABLED:disabled": false, "vcpus": 1, "os-flavor-access:is_public": true, "rxtx_factor": 1.0, `+links("10")+`}}`)
	if rec := a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "gen", "ram": 1, "vcpus": 1, "disk": 0, "id": null}}`); rec.Code != 200 ||
		!strings.Contains(rec.Body.String(), `"name": "gen"`) || len(rec.Body.String()) < 36 {
		t.Errorf("a null id gets a generated one: %d %s", rec.Code, rec.Body)
	}

	a.expect(a.do("PUT", "/v2.1/flavors/big", `{"flavor": {"description": null}}`, mv("2.55")), 200,
		`{"flavor": {"id": "big", "name": "b<i>&g \u00e9", "ram": 1024, "disk": 10, "swap": 512, "OS-FLV-EXT-DATA:ephemeral": 0, `+
			`"OS-FLV-DISABLED:disabled": false, "vcpus": 2, "os-flavor-access:is_public": false, "rxtx_factor": 2.5, `+links("big")+`, "description": null}}`)
	a.expect(a.do("PUT", "/v2.1/flavors/nope", `{"flavor": {"description": "x"}}`, mv("2.55")), 404,
		`{"itemNotFound": {"code": 404, "message": "Flavor nope could not be found."}}`)

	// Extra specs: numbers are answered as sent and stored as str().
	a.expect(a.do("POST", "/v2.1/flavors/big/os-extra_specs", `{"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": 2.50}}`), 200,
		`{"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": 2.5}}`)
	a.expect(a.do("GET", "/v2.1/flavors/big/os-extra_specs", ""), 200, `{"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": "2.5"}}`)
	a.expect(a.do("PUT", "/v2.1/flavors/big/os-extra_specs/quota:n", `{"quota:n": "3"}`), 200, `{"quota:n": "3"}`)
	a.expect(a.do("PUT", "/v2.1/flavors/big/os-extra_specs/quota:n", `{"other": "3"}`), 400,
		`{"badRequest": {"code": 400, "message": "Request body and URI mismatch"}}`)
	a.expect(a.do("GET", "/v2.1/flavors/big/os-extra_specs/quota:n", ""), 200, `{"quota:n": "3"}`)
	a.expect(a.do("DELETE", "/v2.1/flavors/big/os-extra_specs/quota:n", ""), 200, ``)
	a.expect(a.do("GET", "/v2.1/flavors/big/os-extra_specs/quota:n", ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Flavor big has no extra specs with key quota:n."}}`)
	a.expect(a.do("DELETE", "/v2.1/flavors/big/os-extra_specs/quota:n", ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Flavor big has no extra specs with key quota:n."}}`)
	a.expect(a.do("GET", "/v2.1/flavors/nope/os-extra_specs", ""), 404, `{"itemNotFound": {"code": 404, "message": "Flavor nope could not be found."}}`)
	if rec := a.do("GET", "/v2.1/flavors/big", "", mv("2.61")); !strings.Contains(rec.Body.String(), `"extra_specs": {"hw:cpu_policy": "dedicated"}}}`) {
		t.Errorf("2.61 shows extra specs: %s", rec.Body)
	}

	// Access lists.
	a.expect(a.do("GET", "/v2.1/flavors/big/os-flavor-access", ""), 200, `{"flavor_access": []}`)
	a.expect(a.do("POST", "/v2.1/flavors/big/action", `{"addTenantAccess": {"tenant": "p1"}}`), 200,
		`{"flavor_access": [{"flavor_id": "big", "tenant_id": "p1"}]}`)
	a.expect(a.do("POST", "/v2.1/flavors/big/action", `{"addTenantAccess": {"tenant": "p1"}}`), 409,
		`{"conflictingRequest": {"code": 409, "message": "Flavor access already exists for flavor big and project p1 combination."}}`)
	a.expect(a.do("POST", "/v2.1/flavors/2/action", `{"addTenantAccess": {"tenant": "p1"}}`, mv("2.7")), 409,
		`{"conflictingRequest": {"code": 409, "message": "Can not add access to a public flavor."}}`)
	a.expect(a.do("GET", "/v2.1/flavors/2/os-flavor-access", ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Access list not available for public flavors."}}`)
	a.expect(a.do("GET", "/v2.1/flavors?is_public=false", "", "X-Auth-Token: admin:p1"), 200,
		`{"flavors": [{"id": "big", "name": "b<i>&g \u00e9", `+links("big")+`}]}`)
	a.expect(a.do("POST", "/v2.1/flavors/big/action", `{"removeTenantAccess": {"tenant": "p2"}}`), 404,
		`{"itemNotFound": {"code": 404, "message": "Flavor access not found for big / p2 combination."}}`)
	a.expect(a.do("POST", "/v2.1/flavors/big/action", `{"removeTenantAccess": {"tenant": "p1"}}`), 200, `{"flavor_access": []}`)

	// Berth's /v1 reads the same records (by name, then by id).
	if rec := a.do("GET", "/v1/flavors/num", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"id":"10"`) {
		t.Errorf("/v1 does not see the flavor the Nova API created: %d %s", rec.Code, rec.Body)
	}

	a.expect(a.do("DELETE", "/v2.1/flavors/big", ""), 202, ``)
	a.expect(a.do("DELETE", "/v2.1/flavors/big", ""), 404, `{"itemNotFound": {"code": 404, "message": "Flavor big could not be found."}}`)
	if rec := a.do("GET", "/v1/flavors/big", ""); rec.Code != 404 {
		t.Errorf("deleted flavor still in /v1: %d", rec.Code)
	}
}
