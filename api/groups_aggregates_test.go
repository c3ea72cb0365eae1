package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// withPlacement is an API over real placement, with compute hosts
// registered as agents register them.
type withPlacement struct {
	t     *testing.T
	url   string
	cli   *clientv3.Client
	keys  etcdschema.Keys
	place *placement.Service
}

func newAPIWithPlacement(t *testing.T, hosts ...string) *withPlacement {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := EnsureFlavors(ctx, cli, keys, DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := p.EnsureProvider(ctx, "rp-"+h, h, ""); err != nil {
			t.Fatal(err)
		}
		svc := &etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: "rp-" + h}
		if _, err := cli.Put(ctx, keys.Service(h), etcdschema.MustEncode(svc)); err != nil {
			t.Fatal(err)
		}
	}
	api := New(cli, keys, p, hclog.NewNullLogger())
	api.SetDefaultAvailabilityZone("home")
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &withPlacement{t: t, url: srv.URL, cli: cli, keys: keys, place: p}
}

func (w *withPlacement) call(method, path, body string, want int) map[string]any {
	w.t.Helper()
	status, out := do(w.t, method, w.url+path, body)
	if status != want {
		w.t.Fatalf("%s %s: status %d, want %d (%v)", method, path, status, want, out)
	}
	return out
}

func (w *withPlacement) providerAggregates(host string) []string {
	w.t.Helper()
	p, err := w.place.Provider(context.Background(), "rp-"+host)
	if err != nil {
		w.t.Fatal(err)
	}
	return p.Aggregates
}

func TestServerGroupsAPI(t *testing.T) {
	w := newAPIWithPlacement(t)
	for _, c := range []struct{ desc, body, msg string }{
		{"no body", `{}`, "'server_group'"},
		{"no name", `{"server_group":{"policy":"affinity"}}`, "'name'"},
		{"unknown policy", `{"server_group":{"name":"g","policy":"spread"}}`, "'policy'"},
		{"rules need anti-affinity", `{"server_group":{"name":"g","policy":"affinity","rules":{"max_server_per_host":2}}}`, "only allowed"},
		{"max_server_per_host must be positive", `{"server_group":{"name":"g","policy":"anti-affinity","rules":{"max_server_per_host":0}}}`, "positive"},
		{"unknown rule", `{"server_group":{"name":"g","policy":"anti-affinity","rules":{"min":1}}}`, "unknown rule"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			out := w.call(http.MethodPost, "/v1/server-groups", c.body, 400)
			if b, _ := json.Marshal(out); !strings.Contains(string(b), c.msg) {
				t.Fatalf("error %s does not mention %q", b, c.msg)
			}
		})
	}
	out := w.call(http.MethodPost, "/v1/server-groups",
		`{"server_group":{"name":"web","policy":"anti-affinity","rules":{"max_server_per_host":2}}}`, 200)
	g := out["server_group"].(map[string]any)
	id := g["id"].(string)
	if g["policy"] != "anti-affinity" || g["rules"].(map[string]any)["max_server_per_host"] != 2.0 {
		t.Fatalf("created %v", g)
	}
	// Hint values that would reach etcd keys must be uuids.
	w.call(http.MethodPost, "/v1/servers",
		`{"server":{"name":"s","flavorRef":"m1.tiny"},"os:scheduler_hints":{"group":"`+id+`/members/`+id+`"}}`, 400)
	w.call(http.MethodPost, "/v1/servers",
		`{"server":{"name":"s","flavorRef":"m1.tiny"},"os:scheduler_hints":{"group":"`+id+`","same_host":"x"}}`, 400)
	// Servers booted into the group become its members at once.
	const other = "0f3c1e2d-4b5a-4c6d-8e7f-901a2b3c4d5e"
	out = w.call(http.MethodPost, "/v1/servers",
		`{"server":{"name":"s","flavorRef":"m1.tiny","max_count":2},"os:scheduler_hints":{"group":"`+id+`","same_host":"`+other+`"}}`, 202)
	var ids []string
	for _, s := range out["servers"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	out = w.call(http.MethodGet, "/v1/server-groups/"+id, "", 200)
	var members []string
	for _, m := range out["server_group"].(map[string]any)["members"].([]any) {
		members = append(members, m.(string))
	}
	slices.Sort(ids)
	if !slices.Equal(members, ids) {
		t.Fatalf("members %v, want %v", members, ids)
	}
	// The build request carries the hints for the scheduler.
	resp, err := w.cli.Get(context.Background(), w.keys.BuildRequest(ids[0]))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("build request: %v", err)
	}
	var br etcdschema.BuildRequest
	if err := etcdschema.Decode("br", resp.Kvs[0].Value, &br); err != nil {
		t.Fatal(err)
	}
	if br.Hints.Group != id || !slices.Equal(br.Hints.SameHost, []string{other}) {
		t.Fatalf("build request hints %+v", br.Hints)
	}
	// A deleted server leaves the group.
	w.call(http.MethodDelete, "/v1/servers/"+ids[0], "", 204)
	out = w.call(http.MethodGet, "/v1/server-groups/"+id, "", 200)
	if got := out["server_group"].(map[string]any)["members"].([]any); len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("members after delete %v, want [%s]", got, ids[1])
	}
	if got := w.call(http.MethodGet, "/v1/server-groups", "", 200)["server_groups"].([]any); len(got) != 1 {
		t.Fatalf("list %v", got)
	}
	w.call(http.MethodPost, "/v1/servers", `{"name":"s","flavor":"m1.tiny","scheduler_hints":{"group":"nope"}}`, 400)
	w.call(http.MethodDelete, "/v1/server-groups/"+id, "", 204)
	w.call(http.MethodGet, "/v1/server-groups/"+id, "", 404)
	w.call(http.MethodDelete, "/v1/server-groups/"+id, "", 404)
	left, err := w.cli.Get(context.Background(), w.keys.ServerGroupPrefix(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || left.Count != 0 {
		t.Fatalf("group keys left after delete: %d (%v)", left.Count, err)
	}
}

func TestAggregatesAPI(t *testing.T) {
	w := newAPIWithPlacement(t, "h1", "h2")
	create := func(body string) string {
		return w.call(http.MethodPost, "/v1/os-aggregates", body, 200)["aggregate"].(map[string]any)["id"].(string)
	}
	east := create(`{"aggregate":{"name":"east","availability_zone":"az-east"}}`)
	west := create(`{"aggregate":{"name":"west","availability_zone":"az-west"}}`)
	ssd := create(`{"aggregate":{"name":"ssd"}}`)
	w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"east"}}`, 409)
	w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"bad","availability_zone":"a:b"}}`, 400)

	action := func(id, body string, want int) map[string]any {
		return w.call(http.MethodPost, "/v1/os-aggregates/"+id+"/action", body, want)
	}
	action(east, `{"add_host":{"host":"nowhere"}}`, 404)
	out := action(east, `{"add_host":{"host":"h1"}}`, 200)
	if hosts := out["aggregate"].(map[string]any)["hosts"].([]any); len(hosts) != 1 || hosts[0] != "h1" {
		t.Fatalf("hosts %v", hosts)
	}
	if got := w.providerAggregates("h1"); !slices.Contains(got, east) {
		t.Fatalf("h1's provider aggregates %v lack %s: not mirrored to placement", got, east)
	}
	action(east, `{"add_host":{"host":"h1"}}`, 409)
	// One zone per host.
	out = action(west, `{"add_host":{"host":"h1"}}`, 409)
	if b, _ := json.Marshal(out); !strings.Contains(string(b), "az-east") {
		t.Fatalf("conflict does not name the zone: %s", b)
	}
	action(ssd, `{"add_host":{"host":"h1"}}`, 200) // no zone: fine
	action(west, `{"add_host":{"host":"h2"}}`, 200)
	// Moving ssd into a zone its host is not in is refused too.
	action(ssd, `{"set_metadata":{"metadata":{"availability_zone":"az-west"}}}`, 409)
	out = action(ssd, `{"set_metadata":{"metadata":{"availability_zone":"az-east","ram_weight_multiplier":"2"}}}`, 200)
	meta := out["aggregate"].(map[string]any)["metadata"].(map[string]any)
	if meta["availability_zone"] != "az-east" || meta["ram_weight_multiplier"] != "2" {
		t.Fatalf("metadata %v", meta)
	}
	out = action(ssd, `{"set_metadata":{"metadata":{"ram_weight_multiplier":null}}}`, 200)
	if _, ok := out["aggregate"].(map[string]any)["metadata"].(map[string]any)["ram_weight_multiplier"]; ok {
		t.Fatal("a null metadata value must delete the key")
	}
	action(ssd, `{"add_host":{"host":"h1"},"remove_host":{"host":"h1"}}`, 400)

	// Requests may name the default zone or an aggregate's.
	w.call(http.MethodPost, "/v1/servers", `{"name":"a","flavor":"m1.tiny","availability_zone":"az-west"}`, 202)
	w.call(http.MethodPost, "/v1/servers", `{"name":"a","flavor":"m1.tiny","availability_zone":"home"}`, 202)
	w.call(http.MethodPost, "/v1/servers", `{"name":"a","flavor":"m1.tiny","availability_zone":"mars"}`, 400)

	w.call(http.MethodDelete, "/v1/os-aggregates/"+east, "", 400) // not empty
	action(east, `{"remove_host":{"host":"h1"}}`, 200)
	action(east, `{"remove_host":{"host":"h1"}}`, 404)
	if got := w.providerAggregates("h1"); slices.Contains(got, east) || !slices.Contains(got, ssd) {
		t.Fatalf("h1's provider aggregates after removal: %v", got)
	}
	w.call(http.MethodDelete, "/v1/os-aggregates/"+east, "", 204)
	w.call(http.MethodGet, "/v1/os-aggregates/"+east, "", 404)
	if got := w.call(http.MethodGet, "/v1/os-aggregates", "", 200)["aggregates"].([]any); len(got) != 2 {
		t.Fatalf("list %v", got)
	}
	// The name is free again.
	create(`{"aggregate":{"name":"east"}}`)
}

// TestConcurrentZoneChangesKeepOneZonePerHost adds one host to aggregates
// of different zones all at once: the compare on the whole aggregate set
// lets exactly one win.
func TestConcurrentZoneChangesKeepOneZonePerHost(t *testing.T) {
	w := newAPIWithPlacement(t, "h1")
	var ids []string
	for _, z := range []string{"a", "b", "c", "d"} {
		out := w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"`+z+`","availability_zone":"az-`+z+`"}}`, 200)
		ids = append(ids, out["aggregate"].(map[string]any)["id"].(string))
	}
	statuses := make(chan int, len(ids))
	for _, id := range ids {
		go func(id string) {
			status, _ := do(t, http.MethodPost, w.url+"/v1/os-aggregates/"+id+"/action", `{"add_host":{"host":"h1"}}`)
			statuses <- status
		}(id)
	}
	ok := 0
	for range ids {
		switch s := <-statuses; s {
		case 200:
			ok++
		case 409:
		default:
			t.Errorf("status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d zones took the host, want exactly 1", ok)
	}
	in := 0
	for _, a := range w.call(http.MethodGet, "/v1/os-aggregates", "", 200)["aggregates"].([]any) {
		if len(a.(map[string]any)["hosts"].([]any)) > 0 {
			in++
		}
	}
	if in != 1 {
		t.Fatalf("host is in %d zones", in)
	}
}

func TestUpdateAggregate(t *testing.T) {
	w := newAPIWithPlacement(t, "h1")
	id := w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"a","availability_zone":"z1"}}`, 200)["aggregate"].(map[string]any)["id"].(string)
	w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"b"}}`, 200)
	path := "/v1/os-aggregates/" + id

	w.call(http.MethodPut, path, `{"aggregate":{"name":"b"}}`, 409)
	w.call(http.MethodPut, path, `{"aggregate":{}}`, 400)
	w.call(http.MethodPut, path, `{"aggregate":{"availability_zone":"x:y"}}`, 400)
	out := w.call(http.MethodPut, path, `{"aggregate":{"name":"c","availability_zone":"z2"}}`, 200)["aggregate"].(map[string]any)
	if out["name"] != "c" || out["availability_zone"] != "z2" {
		t.Fatalf("updated %v", out)
	}
	w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"a"}}`, 200) // the old name is free

	// A zone whose host runs a server cannot be renamed or removed.
	w.call(http.MethodPost, path+"/action", `{"add_host":{"host":"h1"}}`, 200)
	info := &etcdschema.InstanceInfo{UUID: "s1", Host: "h1"}
	if _, err := w.cli.Put(context.Background(), w.keys.HostInstance("h1", "s1"), etcdschema.MustEncode(info)); err != nil {
		t.Fatal(err)
	}
	w.call(http.MethodPut, path, `{"aggregate":{"availability_zone":"z3"}}`, 409)
	w.call(http.MethodPost, path+"/action", `{"set_metadata":{"metadata":{"availability_zone":null}}}`, 409)
	w.call(http.MethodPut, path, `{"aggregate":{"name":"d"}}`, 200) // the name alone may change
	if _, err := w.cli.Delete(context.Background(), w.keys.HostInstance("h1", "s1")); err != nil {
		t.Fatal(err)
	}
	out = w.call(http.MethodPut, path, `{"aggregate":{"availability_zone":null}}`, 200)["aggregate"].(map[string]any)
	if out["availability_zone"] != nil {
		t.Fatalf("zone not removed: %v", out)
	}
}

// TestSyncAggregatesRepairsPlacement loses a host's placement aggregate (a
// provider re-registered, say) and a host's service record: sync puts the
// first back, reports the second, and changes nothing when run again.
func TestSyncAggregatesRepairsPlacement(t *testing.T) {
	w := newAPIWithPlacement(t, "h1", "h2")
	ctx := context.Background()
	id := w.call(http.MethodPost, "/v1/os-aggregates", `{"aggregate":{"name":"a"}}`, 200)["aggregate"].(map[string]any)["id"].(string)
	w.call(http.MethodPost, "/v1/os-aggregates/"+id+"/action", `{"add_host":{"host":"h1"}}`, 200)
	w.call(http.MethodPost, "/v1/os-aggregates/"+id+"/action", `{"add_host":{"host":"h2"}}`, 200)
	err := w.place.UpdateProvider(ctx, "rp-h1", func(p *etcdschema.Provider) error { p.Aggregates = nil; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.cli.Delete(ctx, w.keys.Service("h2")); err != nil {
		t.Fatal(err)
	}
	out := w.call(http.MethodPost, "/v1/os-aggregates/sync", "", 200)
	if out["hosts"] != 2.0 || out["added"] != 1.0 || len(out["missing"].([]any)) != 1 || out["missing"].([]any)[0] != "h2" {
		t.Fatalf("sync: %v", out)
	}
	if got := w.providerAggregates("h1"); !slices.Contains(got, id) {
		t.Fatalf("h1's provider aggregates %v lack %s after sync", got, id)
	}
	before, err := w.place.Provider(ctx, "rp-h1")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.call(http.MethodPost, "/v1/os-aggregates/sync", "", 200); out["added"] != 0.0 {
		t.Fatalf("second sync added %v", out["added"])
	}
	after, err := w.place.Provider(ctx, "rp-h1")
	if err != nil || after.Generation != before.Generation {
		t.Fatalf("a sync with nothing to do bumped the generation %d -> %d (%v)", before.Generation, after.Generation, err)
	}
}
