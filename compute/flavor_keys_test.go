package compute

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestFlavorNameWithSlash: Nova's flavor name is any printable string, "/"
// included. Berth keys a flavor by its name, so the name is stored under
// its escaped spelling (etcdschema): the flavor is created, found by id
// and by name (a second one is refused as in Nova, a /v1 create names it),
// deleted, and no key outside the schema exists at any point.
func TestFlavorNameWithSlash(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	ctx := context.Background()
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	legacy := api.New(cli, keys, nil, hclog.NewNullLogger())
	a := &testAPI{t: t, h: New(cli, keys, hclog.NewNullLogger()).Beside(legacy)}

	const name = "gpu/a100 ../../hosts/h1/alive"
	if rec := a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "`+name+`", "ram": 1, "vcpus": 1, "disk": 0, "id": "gpu"}}`); rec.Code != 200 ||
		!strings.Contains(rec.Body.String(), `"name": "`+name+`"`) {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	if rec := a.do("GET", "/v2.1/flavors/gpu", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), name) {
		t.Fatalf("show: %d %s", rec.Code, rec.Body)
	}
	a.expect(a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "`+name+`", "ram": 1, "vcpus": 1, "disk": 0}}`),
		409, `{"conflictingRequest": {"code": 409, "message": "Flavor with name `+name+` already exists."}}`)
	if rec := a.do("POST", "/v1/servers", `{"name": "s", "flavor": "`+name+`"}`); rec.Code != 202 {
		t.Fatalf("/v1 create with the flavor: %d %s", rec.Code, rec.Body)
	}
	checkKeyspace(t, cli, keys, 1)
	a.expect(a.do("DELETE", "/v2.1/flavors/gpu", ""), 202, ``)
	checkKeyspace(t, cli, keys, 0)
}

// checkKeyspace lists every key: each must parse, and escaped exactly the
// flavor keys expected (the name with "/").
func checkKeyspace(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, escapedFlavors int) {
	t.Helper()
	resp, err := cli.Get(context.Background(), "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	escaped := 0
	for _, kv := range resp.Kvs {
		pk, err := keys.ParseKey(string(kv.Key))
		if err != nil {
			t.Errorf("key outside the schema: %v", err)
			continue
		}
		for _, seg := range []string{pk.Host, pk.Cell, pk.UUID, pk.Name, pk.Group, pk.Role, pk.ID} {
			if etcdschema.Escaped(seg) {
				if pk.Kind != etcdschema.KindFlavor {
					t.Errorf("key %q (%s) holds an escaped segment", kv.Key, pk.Kind)
				}
				escaped++
			}
		}
	}
	if escaped != escapedFlavors {
		t.Errorf("%d escaped flavor keys, want %d", escaped, escapedFlavors)
	}
}
