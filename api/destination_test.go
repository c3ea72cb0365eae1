package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestCreateWithRequestedHost checks Nova's host / hypervisor_hostname on
// server create: unknown or disagreeing names are refused before anything
// is written, a known host is carried in the BuildRequest for the
// superconductor to pin the scheduling to.
func TestCreateWithRequestedHost(t *testing.T) {
	srv, keys, cli := newAPIWithClient(t)
	ctx := context.Background()
	svc := &etcdschema.Service{Host: "compute-1", Cell: "cell1", ProviderUUID: "rp-1"}
	if _, err := cli.Put(ctx, keys.Service("compute-1"), etcdschema.MustEncode(svc)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		desc, body string
		status     int
		msg        string
		host, node string
		name       string // of the server a 202 writes
	}{
		{"unknown host", `{"name":"a","flavor":"m1.small","host":"nope"}`, 400, "Compute host nope could not be found.", "", "", ""},
		{"unknown node", `{"name":"a","flavor":"m1.small","hypervisor_hostname":"nope"}`, 400, "Hypervisor hostname nope could not be found.", "", "", ""},
		{"host and another node", `{"name":"a","flavor":"m1.small","host":"compute-1","hypervisor_hostname":"compute-2"}`, 400, "Compute host compute-1 has no node compute-2.", "", "", ""},
		{"known host", `{"server":{"name":"h","flavorRef":"m1.small","host":"compute-1"}}`, 202, "", "compute-1", "", "h"},
		{"known node", `{"name":"n","flavor":"m1.small","hypervisor_hostname":"compute-1"}`, 202, "", "", "compute-1", "n"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			before, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			status, out := do(t, http.MethodPost, srv.URL+"/v1/servers", c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d (%v)", status, c.status, out)
			}
			resp, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if c.msg != "" {
				b, _ := json.Marshal(out)
				if !strings.Contains(string(b), c.msg) {
					t.Fatalf("error %s does not mention %q", b, c.msg)
				}
				if int64(len(resp.Kvs)) != before.Count {
					t.Fatalf("a refused create wrote %d build requests", int64(len(resp.Kvs))-before.Count)
				}
				return
			}
			found := false
			for _, kv := range resp.Kvs {
				var br etcdschema.BuildRequest
				if err := etcdschema.Decode(string(kv.Key), kv.Value, &br); err != nil {
					t.Fatal(err)
				}
				if br.Host != "" || br.Node != "" {
					if br.Name != c.name {
						continue
					}
					found = true
					if br.Host != c.host || br.Node != c.node {
						t.Fatalf("build request carries host %q node %q, want %q %q", br.Host, br.Node, c.host, c.node)
					}
				}
			}
			if !found {
				t.Fatal("no build request written")
			}
		})
	}
}
