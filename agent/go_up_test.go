package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// cellOneClient is an etcd client with cell1 defined under /t: the cell
// the agents of these tests map their host to.
func cellOneClient(t *testing.T) (*clientv3.Client, etcdschema.Keys) {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	if _, err := cli.Put(context.Background(), keys.Cell("cell1"), etcdschema.MustEncode(&etcdschema.Cell{Name: "cell1", UUID: "c1"})); err != nil {
		t.Fatal(err)
	}
	return cli, keys
}

// runAgent starts an agent for h1 in cell1 that runs until the returned
// stop is called (which waits for Run to return), and waits until it
// works casts (it is up then).
func runAgent(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys) (a *Agent, stop func()) {
	t.Helper()
	p := placement.New(cli, keys, hclog.NewNullLogger())
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
		Inventory: Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}},
		cli, keys, p, NewFakeDriver("h1", FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("agent run: %v", err)
		}
	}
	t.Cleanup(stop)
	testwait.Until(t, "the agent's builds informer synced", func() bool { return a.builds.WaitSynced(ctx) == nil })
	return a, stop
}

// kvAt reads key as it was at revision rev (nil: absent then).
func kvAt(t *testing.T, cli *clientv3.Client, key string, rev int64) []byte {
	t.Helper()
	resp, err := cli.Get(context.Background(), key, clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("read %s at %d: %v", key, rev, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0].Value
}

// upRevision is the revision at which h1 became up as it is now: its
// alive key's creation. It fails the test unless the service record did
// not exist before that revision or existed already when the present
// alive key was written together with it; that is, unless no reader (the
// leader's host manager, the API's service list) could ever see the
// record without the alive key since the record first appeared.
func upRevision(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys) (up int64, svc etcdschema.Service) {
	t.Helper()
	ctx := context.Background()
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(keys.Service("h1")), clientv3.OpGet(keys.Alive("h1"))).Commit()
	if err != nil {
		t.Fatal(err)
	}
	svcKvs, aliveKvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(svcKvs) != 1 || len(aliveKvs) != 1 {
		t.Fatalf("h1 not up: %d service records, %d alive keys", len(svcKvs), len(aliveKvs))
	}
	if err := etcdschema.Decode(keys.Service("h1"), svcKvs[0].Value, &svc); err != nil {
		t.Fatal(err)
	}
	return aliveKvs[0].CreateRevision, svc
}

// registeredAt fails the test unless, at revision rev, h1's provider
// existed with its inventory (and the disabled trait when disabled) and
// h1 was mapped to cell1.
func registeredAt(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, a *Agent, rev int64, disabled bool) {
	t.Helper()
	raw := kvAt(t, cli, keys.Provider(a.ProviderUUID()), rev)
	if raw == nil {
		t.Fatalf("h1 read up at revision %d before its provider existed", rev)
	}
	var prov etcdschema.Provider
	if err := etcdschema.Decode(keys.Provider(a.ProviderUUID()), raw, &prov); err != nil {
		t.Fatal(err)
	}
	if prov.Inventories[placement.VCPU].Total != 4 {
		t.Fatalf("h1 read up at revision %d before its inventory was reported: %+v", rev, prov.Inventories)
	}
	if has := slices.Contains(prov.Traits, placement.TraitComputeStatusDisabled); has != disabled {
		t.Fatalf("h1 read up at revision %d with the disabled trait %v, its service disabled %v", rev, has, disabled)
	}
	if kvAt(t, cli, keys.HostMapping("h1"), rev) == nil {
		t.Fatalf("h1 read up at revision %d before it was mapped to its cell", rev)
	}
}

// TestAgentNewHostIsUpOnlyOnceRegistered: a new host's service record
// appears in the same transaction as its alive key, after its provider,
// inventory and cell mapping. Written first (as until session 17), the
// record without an alive key read as a host gone down to the scheduler
// leader; the alive key written first made a host up before a server
// could be placed on it.
func TestAgentNewHostIsUpOnlyOnceRegistered(t *testing.T) {
	cli, keys := cellOneClient(t)
	ctx := context.Background()
	a, _ := runAgent(t, cli, keys)
	up, svc := upRevision(t, cli, keys)
	resp, err := cli.Get(ctx, keys.Service("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if created := resp.Kvs[0].CreateRevision; created != up {
		t.Fatalf("service record created at revision %d, alive key at %d: the leader saw h1 down in between", created, up)
	}
	if svc.Cell != "cell1" || svc.ProviderUUID != a.ProviderUUID() || svc.AgentVersion != Version {
		t.Fatalf("service record written up: %+v", svc)
	}
	registeredAt(t, cli, keys, a, up, false)
}

// TestAgentRestartComesBackUpRegistered: an agent restarting on a host
// whose record exists (disabled and forced down by the operator, with
// failed builds counted) reads down until it is up again in one
// transaction: the operator's fields and failed_builds are kept, the
// provider has the disabled trait by then, and the agent knows the
// failed_builds it found.
func TestAgentRestartComesBackUpRegistered(t *testing.T) {
	cli, keys := cellOneClient(t)
	ctx := context.Background()
	first, stop := runAgent(t, cli, keys)
	if err := first.updateService(ctx, func(s *etcdschema.Service) {
		s.Disabled, s.DisabledReason, s.ForcedDown, s.FailedBuilds = true, "maintenance", true, 2
	}); err != nil {
		t.Fatal(err)
	}
	stop() // revokes the lease: the alive key goes at once
	if resp, err := cli.Get(ctx, keys.Alive("h1")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("alive key after the agent stopped: %v %v", resp, err)
	}
	downSvc, err := cli.Get(ctx, keys.Service("h1"))
	if err != nil || len(downSvc.Kvs) != 1 {
		t.Fatalf("service record after the agent stopped: %v", err)
	}

	second, _ := runAgent(t, cli, keys)
	up, svc := upRevision(t, cli, keys)
	if svc.CreatedAt.IsZero() || !svc.Disabled || svc.DisabledReason != "maintenance" || !svc.ForcedDown || svc.FailedBuilds != 2 {
		t.Fatalf("service record after the restart lost fields: %+v", svc)
	}
	// The record is the one from before (unchanged, so not rewritten) or
	// was rewritten with the alive key: never on its own while down.
	now, err := cli.Get(ctx, keys.Service("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if rev := now.Kvs[0].ModRevision; rev != downSvc.Kvs[0].ModRevision && rev < up {
		t.Fatalf("service record rewritten at revision %d, before the host came up at %d", rev, up)
	}
	registeredAt(t, cli, keys, second, up, true)
	second.failedMu.Lock()
	known := second.failedBuilds
	second.failedMu.Unlock()
	if known != 2 {
		t.Fatalf("restarted agent knows failed_builds %d, want 2", known)
	}
}

// TestAgentGoUpUpdatesAnOldRecordWithTheAliveKey: a record written by an
// older agent (another version, no provider uuid) is brought up to date
// in the transaction that writes the alive key, not before it.
func TestAgentGoUpUpdatesAnOldRecordWithTheAliveKey(t *testing.T) {
	cli, keys := cellOneClient(t)
	ctx := context.Background()
	old := &etcdschema.Service{Host: "h1", Cell: "cell1", AgentVersion: "0.0.1", CreatedAt: time.Now().UTC()}
	if _, err := cli.Put(ctx, keys.Service("h1"), etcdschema.MustEncode(old)); err != nil {
		t.Fatal(err)
	}
	a, _ := runAgent(t, cli, keys)
	up, svc := upRevision(t, cli, keys)
	resp, err := cli.Get(ctx, keys.Service("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if rev := resp.Kvs[0].ModRevision; rev != up {
		t.Fatalf("service record updated at revision %d, alive key written at %d", rev, up)
	}
	if svc.AgentVersion != Version || svc.ProviderUUID != a.ProviderUUID() || !svc.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("service record after coming up: %+v", svc)
	}
	registeredAt(t, cli, keys, a, up, false)
}
