package records

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// put writes v under key.
func put(t *testing.T, cli *clientv3.Client, key string, v etcdschema.Versioned) {
	t.Helper()
	if _, err := cli.Put(context.Background(), key, etcdschema.MustEncode(v)); err != nil {
		t.Fatal(err)
	}
}

// keysUnder lists the keys under prefix.
func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	slices.Sort(out)
	return out
}

func TestBuryInCell0(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := created.Add(time.Hour)
	for _, tc := range []struct {
		desc       string
		mapped     bool // the request's instance mapping exists
		wantBuried bool
	}{
		{"a mapped request is buried", true, true},
		{"a request the user deleted is not", false, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			k := etcdschema.New("/" + t.Name())
			br := &etcdschema.BuildRequest{InstanceUUID: "i1", Name: "web", ProjectID: "p", UserID: "u",
				Flavor: etcdschema.Flavor{ID: "1", Name: "m1.small"}, CreatedAt: created}
			if tc.mapped {
				put(t, cli, k.InstanceMapping("i1"), &etcdschema.InstanceMapping{InstanceUUID: "i1", ProjectID: "p"})
			}
			cmps, ops := BuryInCell0(k, br, "No valid host was found. ", now)
			resp, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
			if err != nil {
				t.Fatal(err)
			}
			if resp.Succeeded != tc.wantBuried {
				t.Fatalf("buried = %v, want %v", resp.Succeeded, tc.wantBuried)
			}
			if !tc.wantBuried {
				if got := keysUnder(t, cli, k.CellInstances(etcdschema.Cell0)); len(got) != 0 {
					t.Fatalf("records written for a deleted request: %v", got)
				}
				return
			}
			var inst etcdschema.Instance
			get(t, cli, k.CellInstance(etcdschema.Cell0, "i1"), &inst)
			if inst.Status != etcdschema.StatusError || inst.Cell != etcdschema.Cell0 || inst.Name != "web" ||
				inst.ProjectID != "p" || inst.UserID != "u" || inst.Flavor.Name != "m1.small" ||
				!inst.CreatedAt.Equal(created) || !inst.UpdatedAt.Equal(now) {
				t.Fatalf("buried instance %+v", inst)
			}
			if f := inst.Fault; f == nil || f.Code != 500 || f.Message != "No valid host was found. " || !f.Created.Equal(now) {
				t.Fatalf("buried instance's fault %+v", inst.Fault)
			}
			var m etcdschema.InstanceMapping
			get(t, cli, k.InstanceMapping("i1"), &m)
			if m.Cell != etcdschema.Cell0 || m.ProjectID != "p" || !m.CreatedAt.Equal(created) {
				t.Fatalf("mapping %+v, want it pointing to cell0", m)
			}
		})
	}
}

// get reads and decodes key into v.
func get(t *testing.T, cli *clientv3.Client, key string, v etcdschema.Versioned) {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("%s not found", key)
	}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, v); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteInstance(t *testing.T) {
	cli := etcdtest.Client(t)
	for _, tc := range []struct {
		desc string
		host string // the host the instance is on, "" for none
	}{
		{"an instance on a host", "h1"},
		{"an instance on no host (never scheduled, or its host was taken back)", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			k := etcdschema.New("/" + t.Name())
			// Every record of "gone" and of a neighbour, "kept", on the same host.
			for _, u := range []string{"gone", "kept"} {
				put(t, cli, k.CellInstance("cell1", u), &etcdschema.Instance{UUID: u, Cell: "cell1", Host: tc.host})
				put(t, cli, k.InstanceMapping(u), &etcdschema.InstanceMapping{InstanceUUID: u, Cell: "cell1", ProjectID: "p"})
				put(t, cli, k.QuotaInstance("p", u), &etcdschema.QuotaInstance{})
				put(t, cli, k.Alternates(u), &etcdschema.Alternates{InstanceUUID: u, Cell: "cell1"})
				put(t, cli, k.Retry("cell1", u), &etcdschema.Retry{InstanceUUID: u, Cell: "cell1"})
				if tc.host != "" {
					put(t, cli, k.HostInstance(tc.host, u), &etcdschema.InstanceInfo{UUID: u, Host: tc.host})
				}
			}
			before := keysUnder(t, cli, k.All())
			if _, err := cli.Txn(context.Background()).Then(DeleteInstance(k, "cell1", tc.host, "gone", "p")...).Commit(); err != nil {
				t.Fatal(err)
			}
			after := keysUnder(t, cli, k.All())
			var want []string
			for _, key := range before {
				if !isRecordOf(k, key, tc.host, "gone") {
					want = append(want, key)
				}
			}
			if !slices.Equal(after, want) {
				t.Fatalf("keys left %q, want %q", after, want)
			}
			if len(before)-len(after) < 4 {
				t.Fatalf("only %d of gone's records deleted", len(before)-len(after))
			}
		})
	}
}

// isRecordOf says whether key is one of uuid's records the test wrote.
func isRecordOf(k etcdschema.Keys, key, host, uuid string) bool {
	own := []string{k.CellInstance("cell1", uuid), k.InstanceMapping(uuid), k.QuotaInstance("p", uuid), k.Alternates(uuid), k.Retry("cell1", uuid)}
	if host != "" {
		own = append(own, k.HostInstance(host, uuid))
	}
	return slices.Contains(own, key)
}
