package placement

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

func TestStartLoadsExistingAndFollowsWatch(t *testing.T) {
	s, cli := newStarted(t)
	mkProvider(t, s, "rp1", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	// A second service started later must load rp1 from etcd, then see rp2
	// through its watch.
	s2 := startOn(t, cli)
	if _, ok := s2.idx.st.providers["rp1"]; !ok {
		t.Fatalf("rp1 not loaded")
	}
	mkProvider(t, s, "rp2", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
	syncIdx(t, s2)
	s2.idx.mu.RLock()
	_, ok := s2.idx.st.providers["rp2"]
	s2.idx.mu.RUnlock()
	if !ok {
		t.Fatalf("rp2 not applied from the watch")
	}
}

func TestLoadPagesThroughManyProviders(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	for i := 0; i < informer.PageSize+7; i += 100 {
		ops := []clientv3Op{}
		for j := i; j < i+100 && j < informer.PageSize+7; j++ {
			p := &etcdschema.Provider{UUID: fmt.Sprintf("p%05d", j), Name: fmt.Sprintf("n%05d", j)}
			normalizeProvider(p)
			ops = append(ops, opPut(s.keys.Provider(p.UUID), etcdschema.MustEncode(p)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	s2 := startOn(t, cli)
	if n := len(s2.idx.st.providers); n != informer.PageSize+7 {
		t.Fatalf("loaded %d providers, want %d", n, informer.PageSize+7)
	}
}

func TestWatchRelistsAfterCompaction(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "a", "", nil)
	// Follow from an old revision that is then compacted away: the watch
	// must notice and re-list instead of missing events.
	s2 := New(cli, s.keys, nil)
	old, err := s2.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mkProvider(t, s, "b", "", nil)
	resp, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s2.follow(fctx, old)
	if err := s2.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	s2.idx.mu.RLock()
	_, ok := s2.idx.st.providers["b"]
	s2.idx.mu.RUnlock()
	if !ok {
		t.Fatalf("provider b missing after re-list")
	}
}

func TestEnsureAndUpdateProvider(t *testing.T) {
	s, _ := newStarted(t)
	ctx := testCtx(t)
	if err := s.EnsureProvider(ctx, "root", "host1", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureProvider(ctx, "root", "host1", ""); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	if err := s.EnsureProvider(ctx, "other", "host1", ""); !errors.Is(err, ErrDuplicateName) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := s.EnsureProvider(ctx, "child", "host1-gpu", "root"); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureProvider(ctx, "orphan", "x", "missing"); !errors.Is(err, ErrProviderNotFound) {
		t.Fatalf("missing parent: %v", err)
	}
	c, err := s.Provider(ctx, "child")
	if err != nil || c.RootProviderUUID != "root" || c.ParentProviderUUID != "root" {
		t.Fatalf("child: %+v %v", c, err)
	}
	if err := s.UpdateProvider(ctx, "root", func(p *etcdschema.Provider) error {
		p.Traits = append(p.Traits, TraitComputeStatusDisabled, TraitComputeStatusDisabled)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Provider(ctx, "root")
	if p.Generation != 1 || len(p.Traits) != 1 {
		t.Fatalf("after update: gen %d traits %v", p.Generation, p.Traits)
	}
	if _, err := s.updateProvider(ctx, "root", gen(0), func(*etcdschema.Provider) error { return nil }); !errors.Is(err, ErrGenerationConflict) {
		t.Fatalf("stale generation: %v", err)
	}
}
