package placement

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// A child or an allocation that lands between DeleteProvider's checks and
// its transaction must make the delete fail, not orphan it. The hook puts
// the write exactly in that gap.
func TestDeleteProviderLosesToWriteInTheGap(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		write func(t *testing.T, s *Service, parent string)
		want  error
	}{
		{"child created", func(t *testing.T, s *Service, parent string) {
			if _, err := s.CreateProvider(testCtx(t), parent+"-child", parent+"-child", parent); err != nil {
				t.Fatalf("create child: %v", err)
			}
		}, ErrProviderHasChildren},
		{"child moved in", func(t *testing.T, s *Service, parent string) {
			other := parent + "-other"
			if _, err := s.CreateProvider(testCtx(t), other, other, ""); err != nil {
				t.Fatal(err)
			}
			rec, err := s.ReadProvider(testCtx(t), other)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.MoveProvider(testCtx(t), rec, other, parent, true); err != nil {
				t.Fatalf("re-parent: %v", err)
			}
		}, ErrProviderHasChildren},
		{"allocation made", func(t *testing.T, s *Service, parent string) {
			if err := s.PutAllocations(testCtx(t), "c-"+parent, AllocationWrite{
				ProjectID: "p", UserID: "u", Allocations: alloc(parent, map[string]int64{VCPU: 1}),
			}); err != nil {
				t.Fatalf("allocate: %v", err)
			}
		}, ErrProviderInUse},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, _ := newStarted(t)
			mkProvider(t, s, "p", "", map[string]etcdschema.Inventory{VCPU: inv(8)})
			fired := false
			s.beforeDeleteTxn = func(id string) {
				if !fired {
					fired = true
					tc.write(t, s, id)
				}
			}
			err := s.DeleteProvider(testCtx(t), "p")
			if !fired {
				t.Fatal("hook never ran")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("delete: %v, want %v", err, tc.want)
			}
			if _, err := s.getProvider(testCtx(t), "p"); err != nil {
				t.Fatalf("provider gone after a refused delete: %v", err)
			}
		})
	}
}

// Deletes race child creations and claims on real goroutines; whatever
// the interleaving, no provider is left whose parent is gone and no
// consumer holds an allocation on a deleted provider.
func TestDeleteProviderRacesChildrenAndClaims(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	const rounds = 25
	for i := 0; i < rounds; i++ {
		parent := fmt.Sprintf("parent-%d", i)
		mkProvider(t, s, parent, "", map[string]etcdschema.Inventory{VCPU: inv(8)})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(3)
		go func() {
			defer wg.Done()
			<-start
			_ = s.DeleteProvider(ctx, parent)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, _ = s.CreateProvider(ctx, parent+"-child", parent+"-child", parent)
		}()
		go func() {
			defer wg.Done()
			<-start
			_ = s.PutAllocations(ctx, "consumer-"+parent, AllocationWrite{
				ProjectID: "p", UserID: "u", Allocations: alloc(parent, map[string]int64{VCPU: 1}),
			})
		}()
		close(start)
		wg.Wait()
	}
	// Check the invariants on etcd itself, not on the index.
	resp, err := cli.Get(ctx, s.keys.PlacementPrefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]*etcdschema.Provider{}
	var consumers []*etcdschema.Consumer
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, s.keys.Providers()):
			p := &etcdschema.Provider{}
			if err := etcdschema.Decode(k, kv.Value, p); err != nil {
				t.Fatal(err)
			}
			providers[p.UUID] = p
		case strings.HasPrefix(k, s.keys.Consumers()):
			c := &etcdschema.Consumer{}
			if err := etcdschema.Decode(k, kv.Value, c); err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, c)
		}
	}
	deleted := 0
	for i := 0; i < rounds; i++ {
		if _, ok := providers[fmt.Sprintf("parent-%d", i)]; !ok {
			deleted++
		}
	}
	for _, p := range providers {
		if p.ParentProviderUUID != "" && providers[p.ParentProviderUUID] == nil {
			t.Errorf("provider %s orphaned: parent %s deleted", p.UUID, p.ParentProviderUUID)
		}
	}
	for _, c := range consumers {
		for rp := range c.Allocations {
			if providers[rp] == nil {
				t.Errorf("consumer %s holds an allocation on deleted provider %s", c.UUID, rp)
			}
		}
	}
	t.Logf("%d of %d parents deleted", deleted, rounds)
}
