package placement

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// startDeferredOn starts a service on cli with StartDeferred, its
// consumers listed once release is closed.
func startDeferredOn(t *testing.T, cli *clientv3.Client, release <-chan struct{}) *Service {
	t.Helper()
	after := func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return startWith(t, cli, func(s *Service, ctx context.Context) error { return s.StartDeferred(ctx, after) })
}

// TestDeferredConsumersEndAsFollowed: a service started with its
// consumers deferred serves the providers at once; while its consumer
// list waits, consumers are deleted, changed, created, deleted and made
// again (some through the deferred service itself, whose claim or delete
// of an existing consumer it has not listed yet must still see that
// consumer),
// and its watch applies those changes first; the list, at the older
// revision, then adds only what the index knows nothing newer of. The
// end state equals that of a service that followed every write, and a
// reader of consumers (a provider's allocations) waits for the list.
func TestDeferredConsumersEndAsFollowed(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	at := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
	const hosts, perHost = 24, 25 // 600 consumers: decoded in parallel chunks
	uuidOf := seedConsumers(t, s, cli, hosts, perHost, at)
	release := make(chan struct{})
	d := startDeferredOn(t, cli, release)
	if n := d.ProviderCount(); n != hosts {
		t.Fatalf("deferred start indexed %d providers, want %d", n, hosts)
	}
	d.idx.mu.RLock()
	listed := len(d.idx.st.consumers)
	d.idx.mu.RUnlock()
	if listed != 0 {
		t.Fatalf("deferred start indexed %d consumers before its list was released", listed)
	}
	host0 := bootProvider(0, 0, 1, at).UUID
	host1 := bootProvider(1, 0, 1, at).UUID
	type allocsResult struct {
		got map[string]ProviderConsumer
		err error
	}
	waited := make(chan allocsResult, 1)
	go func() {
		got, err := d.ProviderAllocations(ctx, host0)
		waited <- allocsResult{got, err}
	}()

	// Changes while the list waits: deleted, changed, created, deleted
	// and made again, and changed through the deferred service.
	deleted, viaDeferred := churnConsumers(t, s, uuidOf, host0, host1, "feedface-0000-4000-8000-000000000001"), uuidOf(1, 4)
	// The deferred index does not have this consumer yet: the claim
	// must still find it at generation 1 (as etcd has it), not new.
	if err := d.PutAllocations(ctx, viaDeferred, AllocationWrite{ProjectID: "project", UserID: "user", ConsumerGeneration: gen(1),
		Allocations: alloc(host1, map[string]int64{VCPU: 1, MemoryMB: 1024})}); err != nil {
		t.Fatalf("claim of an existing consumer not listed yet: %v", err)
	}
	// Nor a delete of one (which must exist).
	if err := d.DeleteAllocations(ctx, uuidOf(2, 5)); err != nil {
		t.Fatalf("delete of an existing consumer not listed yet: %v", err)
	}
	syncIdx(t, d) // the watch has applied every change before the list
	select {
	case r := <-waited:
		t.Fatalf("a provider's allocations answered before the consumers were listed: %+v, %v", r.got, r.err)
	default:
	}

	close(release)
	if err := d.WaitConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-waited
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, ok := r.got[deleted]; ok || len(r.got) != perHost /* -deleted +created */ {
		t.Errorf("host 0's allocations after the wait: %d consumers (deleted one present: %v), want %d", len(r.got), ok, perHost)
	}
	syncIdx(t, s)
	syncIdx(t, d)
	fresh := startOn(t, cli)
	for _, want := range []struct {
		name string
		svc  *Service
	}{{"followed", s}, {"loaded whole", fresh}} {
		sameConsumers(t, "deferred", d, want.name, want.svc)
	}
}

// TestDeferredConsumersNotListed: when what the list waits for fails (the
// process stops first), WaitConsumers answers that error, not forever
// and not nil.
func TestDeferredConsumersNotListed(t *testing.T) {
	_, cli := newStarted(t)
	failed := errors.New("host manager never synced")
	d := startWith(t, cli, func(d *Service, ctx context.Context) error {
		return d.StartDeferred(ctx, func(context.Context) error { return failed })
	})
	if err := d.WaitConsumers(testCtx(t)); !errors.Is(err, failed) {
		t.Fatalf("WaitConsumers = %v, want %v", err, failed)
	}
	if _, err := d.Usages(testCtx(t), UsageQuery{ProjectID: "p"}); !errors.Is(err, failed) {
		t.Fatalf("Usages = %v, want %v", err, failed)
	}
}

// TestDeferredConsumersReplacedByRelist: a whole re-list (after a
// compaction) installed while the deferred list waits replaces it: the
// deferred list adds nothing and ends, and WaitConsumers answers at once
// with the re-listed consumers in the index.
func TestDeferredConsumersReplacedByRelist(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "5f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b21", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	const consumers = 5
	for i := range consumers {
		if err := s.PutAllocations(ctx, fmt.Sprintf("6d4f2f8e-3c1a-4e5b-9a57-%012d", i), AllocationWrite{ProjectID: "p", UserID: "u",
			Allocations: alloc("5f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b21", map[string]int64{VCPU: 1})}); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	d := startDeferredOn(t, cli, release)
	d.idx.mu.RLock()
	pending := d.idx.st.pending
	d.idx.mu.RUnlock()
	if _, err := d.load(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case <-pending.done:
	case <-ctx.Done():
		t.Fatal("the replaced deferred list never ended")
	}
	if pending.err != nil {
		t.Fatalf("the replaced deferred list ended with %v", pending.err)
	}
	if err := d.WaitConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := d.ProviderAllocations(ctx, "5f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b21")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != consumers {
		t.Fatalf("the re-listed index holds %d consumers on the provider, want %d", len(got), consumers)
	}
}

// TestOnDemandConsumersListedWhenWanted: a service started with its
// consumers on demand lists none until a reader wants them; meanwhile its
// watch indexes the consumers written since, and deletes leave nothing
// behind (no gone entry: the list, read later at the current revision,
// has them already deleted). The first WaitConsumers call starts the
// list, and the end state equals that of a service that followed every
// write.
func TestOnDemandConsumersListedWhenWanted(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	at := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
	const hosts, perHost = 8, 80 // 640 consumers: decoded in parallel chunks
	uuidOf := seedConsumers(t, s, cli, hosts, perHost, at)
	d := startWith(t, cli, func(d *Service, ctx context.Context) error { return d.StartOnDemand(ctx, nil) })
	host0 := bootProvider(0, 0, 1, at).UUID
	host1 := bootProvider(1, 0, 1, at).UUID
	churnConsumers(t, s, uuidOf, host0, host1, "feedface-0000-4000-8000-000000000002")
	// A claim through d of a consumer it has not listed: found in etcd.
	if err := d.DeleteAllocations(ctx, uuidOf(2, 5)); err != nil {
		t.Fatalf("delete of an existing consumer not listed: %v", err)
	}
	syncIdx(t, d)
	d.idx.mu.RLock()
	st := d.idx.st
	var followed []string
	for u := range st.consumers {
		followed = append(followed, u)
	}
	gone, listing := len(st.pending.gone), st.pending.listing
	d.idx.mu.RUnlock()
	if len(followed) != 3 {
		t.Errorf("before any reader the index holds %v, want the 3 consumers written since it started", followed)
	}
	if listing || gone != 0 {
		t.Errorf("before any reader: listing %v, %d deletes remembered; want none", listing, gone)
	}

	// A reader's WaitConsumers starts the list and waits for it.
	if err := d.WaitConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	syncIdx(t, s)
	syncIdx(t, d)
	sameConsumers(t, "on-demand", d, "followed", s)
}

// TestOnDemandConsumersWaitForAfter: a reader's demand does not start
// the list before after returns (the host manager's load first), and
// an after that fails is what WaitConsumers answers.
func TestOnDemandConsumersWaitForAfter(t *testing.T) {
	_, cli := newStarted(t)
	release := make(chan struct{})
	failed := errors.New("host manager never synced")
	d := startWith(t, cli, func(d *Service, ctx context.Context) error {
		return d.StartOnDemand(ctx, func(context.Context) error {
			<-release
			return failed
		})
	})
	// A reader that wants them and stops waiting at once: the list still
	// waits for after.
	gaveUp, cancel := context.WithCancel(testCtx(t))
	cancel()
	if err := d.WaitConsumers(gaveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitConsumers with a cancelled context = %v, want context.Canceled", err)
	}
	d.idx.mu.RLock()
	listing := d.idx.st.pending.listing
	d.idx.mu.RUnlock()
	if listing {
		t.Fatal("the on-demand list started before after returned")
	}
	close(release)
	if err := d.WaitConsumers(testCtx(t)); !errors.Is(err, failed) {
		t.Fatalf("WaitConsumers = %v, want %v", err, failed)
	}
}

// seedConsumers writes hosts boot providers with perHost consumers each
// (one VCPU and 512 MB on their host, generation 1, written at at), a
// transaction a host, and returns the uuid of host h's consumer j.
func seedConsumers(t *testing.T, s *Service, cli *clientv3.Client, hosts, perHost int, at time.Time) func(h, j int) string {
	t.Helper()
	ctx := testCtx(t)
	uuidOf := func(h, j int) string {
		return fmt.Sprintf("%08x-0000-4000-8000-%012d", (j*7919+h*104729)%1000003, h*perHost+j)
	}
	flavor := map[string]int64{VCPU: 1, MemoryMB: 512}
	for h := 0; h < hosts; h++ {
		p := bootProvider(h, perHost, 1, at)
		ops := []clientv3.Op{opPut(s.keys.Provider(p.UUID), etcdschema.MustEncode(p))}
		for j := 0; j < perHost; j++ {
			c := &etcdschema.Consumer{UUID: uuidOf(h, j), Generation: 1, ProjectID: "project", UserID: "user",
				Allocations: map[string]etcdschema.ConsumerAllocation{p.UUID: {Resources: flavor}},
				CreatedAt:   at, UpdatedAt: at}
			ops = append(ops, opPut(s.keys.Consumer(c.UUID), etcdschema.MustEncode(c)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return uuidOf
}

// churnConsumers changes seeded consumers through s while another index
// has not listed them: host 0's consumer 1 deleted (returned), its
// consumer 2 changed, created made new on host 0, and host 1's consumer
// 3 deleted and made again for another project on host 1.
func churnConsumers(t *testing.T, s *Service, uuidOf func(h, j int) string, host0, host1, created string) (deleted string) {
	t.Helper()
	ctx := testCtx(t)
	deleted, changed, remade := uuidOf(0, 1), uuidOf(0, 2), uuidOf(1, 3)
	if err := s.DeleteAllocations(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocations(ctx, changed, AllocationWrite{ProjectID: "project", UserID: "user", ConsumerGeneration: gen(1),
		Allocations: alloc(host0, map[string]int64{VCPU: 2, MemoryMB: 512})}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocations(ctx, created, AllocationWrite{ProjectID: "project", UserID: "user",
		Allocations: alloc(host0, map[string]int64{VCPU: 1})}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAllocations(ctx, remade); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllocations(ctx, remade, AllocationWrite{ProjectID: "other", UserID: "user",
		Allocations: alloc(host1, map[string]int64{VCPU: 3})}); err != nil {
		t.Fatal(err)
	}
	return deleted
}

// sameConsumers checks that index got (named gotName) holds exactly the
// consumers of index want (wantName), at the same mod revisions and
// linked to the same providers, and no pending list.
func sameConsumers(t *testing.T, gotName string, got *Service, wantName string, want *Service) {
	t.Helper()
	got.idx.mu.RLock()
	defer got.idx.mu.RUnlock()
	want.idx.mu.RLock()
	defer want.idx.mu.RUnlock()
	g, w := got.idx.st, want.idx.st
	if len(g.consumers) != len(w.consumers) {
		t.Errorf("%s index holds %d consumers, the %s one %d", gotName, len(g.consumers), wantName, len(w.consumers))
	}
	for u, we := range w.consumers {
		ge, ok := g.consumers[u]
		if !ok {
			t.Errorf("consumer %s: in the %s index, not in the %s one", u, wantName, gotName)
			continue
		}
		if !reflect.DeepEqual(ge.c, we.c) || ge.modRev != we.modRev {
			t.Errorf("consumer %s: %s %+v (rev %d), %s %+v (rev %d)", u, gotName, ge.c, ge.modRev, wantName, we.c, we.modRev)
		}
	}
	if !reflect.DeepEqual(consumerLinks(g), consumerLinks(w)) {
		t.Errorf("provider-consumer links differ from the %s index", wantName)
	}
	if g.pending != nil {
		t.Errorf("the %s index still has a pending list", gotName)
	}
}
