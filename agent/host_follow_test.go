package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// readLog records the keys read through its KV, plain reads and the
// reads inside transactions.
type readLog struct {
	clientv3.KV
	mu   sync.Mutex
	keys []string
}

func (l *readLog) note(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
}

func (l *readLog) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	l.note(key)
	return l.KV.Get(ctx, key, opts...)
}

func (l *readLog) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	for _, op := range append(slices.Clone(r.Success), r.Failure...) {
		if rr := op.GetRequestRange(); rr != nil {
			l.note(string(rr.Key))
		}
	}
	return rawtxn.Commit(ctx, l.KV, r)
}

func (l *readLog) read(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.keys, func(k string) bool { return strings.HasPrefix(k, prefix) })
}

// TestFollowAnswersThePeriodicSyncs: once the agent's follow has seen
// them, other writers' changes of its service record and instance info
// (the API disabling the service, a live migration's source writing
// this host's info, a local delete removing one) reach the periodic
// provider sync and instance sync, which read neither from etcd.
func TestFollowAnswersThePeriodicSyncs(t *testing.T) {
	cli := etcdtest.Client(t)
	// Registered and up, its follow running alone (no service watch to
	// sync the provider on the disable: the periodic sync must).
	a := syncedHost(t, cli, 0)
	keys := a.keys
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.followInf.Run(ctx)
	f := etcdschema.Flavor{ID: "2", Name: "m", VCPUs: 2, RAMMB: 1024, DiskGB: 1}
	for _, u := range []string{"kept", "gone"} {
		if _, err := cli.Txn(ctx).Then(
			clientv3.OpPut(keys.CellInstance("cell1", u), etcdschema.MustEncode(&etcdschema.Instance{
				UUID: u, Cell: "cell1", Host: "h1", Status: etcdschema.StatusActive, Flavor: f})),
			clientv3.OpPut(keys.HostInstance("h1", u), etcdschema.MustEncode(&etcdschema.InstanceInfo{
				UUID: u, Host: "h1", FlavorID: f.ID, Flavor: f.Name}))).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, keys.HostInstance("h1", "gone")); err != nil {
		t.Fatal(err)
	}
	// The API's disable, read-modify-write of the record.
	var svc etcdschema.Service
	readRecord(t, cli, keys.Service("h1"), &svc)
	svc.Disabled = true
	if _, err := cli.Put(ctx, keys.Service("h1"), etcdschema.MustEncode(&svc)); err != nil {
		t.Fatal(err)
	}
	waitFollowed(t, cli, a)

	reads := &readLog{KV: cli.KV}
	cli.KV = reads
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	if _, err := a.SyncInstances(ctx); err != nil {
		t.Fatal(err)
	}
	cli.KV = reads.KV
	for _, k := range []string{keys.Service("h1"), keys.HostInstances("h1")} {
		if reads.read(k) {
			t.Errorf("the periodic syncs read %s from etcd; the follow has it", k)
		}
	}
	prov, err := placement.New(cli, keys, hclog.NewNullLogger()).Provider(ctx, a.ProviderUUID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(prov.Traits, placement.TraitComputeStatusDisabled) {
		t.Errorf("provider traits %v after a sync of a disabled service", prov.Traits)
	}
	var hs etcdschema.HostSync
	readRecord(t, cli, keys.HostSync("h1"), &hs)
	if !slices.Equal(hs.UUIDs, []string{"kept"}) {
		t.Errorf("instance sync listed %v, want [kept]", hs.UUIDs)
	}
	var hc etcdschema.HostCapacity
	readRecord(t, cli, keys.HostCapacity("h1"), &hc)
	if hc.Used[placement.VCPU] != 2 {
		t.Errorf("capacity used %v, want the kept instance's 2 VCPU", hc.Used)
	}
}

// TestFollowedMappingAnswersTheTick: with the host's keys and its mapping
// followed, an idle host's provider tick makes no request to etcd; an
// operator's removal of the mapping reaches the follow, and the next
// tick maps the host again.
func TestFollowedMappingAnswersTheTick(t *testing.T) {
	cli := etcdtest.Client(t)
	a := syncedHost(t, cli, 0)
	keys := a.keys
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.followInf.Run(ctx)
	go a.mappingInf.Run(ctx)
	waitFollowed(t, cli, a)
	waitMappingFollowed(t, cli, a)
	// The first tick may still write (the provider's first sync, the
	// first capacity report); the next is an idle host's.
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	c := &requestCount{KV: cli.KV}
	cli.KV = c
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	cli.KV = c.KV
	if c.n != 0 {
		t.Errorf("an idle followed host's provider tick made %d requests to etcd, want 0", c.n)
	}

	// An operator removes the mapping: the follow sees it gone, and the
	// tick maps the host again.
	if _, err := cli.Delete(ctx, keys.HostMapping("h1")); err != nil {
		t.Fatal(err)
	}
	waitMappingFollowed(t, cli, a)
	if _, mappingKnown, ok := a.follow.tickReads("h1", true); !ok || !mappingKnown {
		t.Fatalf("follow: known %v, mapping known %v after its watch caught up", ok, mappingKnown)
	}
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	var m etcdschema.HostMapping
	readRecord(t, cli, keys.HostMapping("h1"), &m)
	if m.Cell != "cell1" {
		t.Errorf("host mapped again to %q, want cell1", m.Cell)
	}
	waitMappingFollowed(t, cli, a)
	if r, _, _ := a.follow.tickReads("h1", true); !r.mapped {
		t.Error("the follow missed the host's new mapping")
	}
}

// waitMappingFollowed waits until a's mapping watch has seen every write
// so far.
func waitMappingFollowed(t *testing.T, cli *clientv3.Client, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.mappingInf.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}
