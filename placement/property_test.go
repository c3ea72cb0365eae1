package placement

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestClaimsNeverOvercommit races many goroutines claiming, resizing and
// freeing random allocations on a few providers, while a checker reads
// every placement record at one revision over and over: no snapshot may
// show a provider over capacity, or usages that differ from the sum of the
// consumers' allocations.
func TestClaimsNeverOvercommit(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	rps := []string{"rp0", "rp1", "rp2"}
	for _, rp := range rps {
		mkProvider(t, s, rp, "", map[string]etcdschema.Inventory{VCPU: inv(10), MemoryMB: inv(64)})
	}
	const workers, ops = 8, 40
	var wg gosync.WaitGroup
	var ok, conflicts atomic.Int64
	done := make(chan struct{})
	checkerErr := make(chan error, 1)
	var snapshots atomic.Int64
	go func() {
		defer close(checkerErr)
		for {
			select {
			case <-done:
				checkerErr <- checkSnapshot(ctx, cli, s.keys)
				return
			default:
			}
			if err := checkSnapshot(ctx, cli, s.keys); err != nil {
				checkerErr <- err
				return
			}
			snapshots.Add(1)
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < ops; i++ {
				consumer := fmt.Sprintf("c%d-%d", w, rnd.Intn(4))
				var err error
				switch rnd.Intn(3) {
				case 0:
					err = s.DeleteAllocations(ctx, consumer)
				default:
					w := AllocationWrite{Allocations: map[string]ProviderAllocation{}, ProjectID: "p", UserID: "u"}
					for _, rp := range rps {
						if rnd.Intn(2) == 0 {
							w.Allocations[rp] = ProviderAllocation{Resources: map[string]int64{
								VCPU: int64(1 + rnd.Intn(4)), MemoryMB: int64(1 + rnd.Intn(20)),
							}}
						}
					}
					cur, gerr := s.GetAllocations(ctx, consumer)
					if gerr == nil {
						w.ConsumerGeneration = &cur.Generation
					}
					err = s.PutAllocations(ctx, consumer, w)
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrInsufficientCapacity), errors.Is(err, ErrNotFound),
					errors.Is(err, ErrConsumerGenerationConflict), errors.Is(err, ErrConcurrentUpdate):
					conflicts.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
		}(w)
	}
	wg.Wait()
	close(done)
	for err := range checkerErr {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ok.Load() == 0 {
		t.Fatalf("no write succeeded")
	}
	t.Logf("%d writes, %d refused, %d snapshots checked", ok.Load(), conflicts.Load(), snapshots.Load())
}

func checkSnapshot(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys) error {
	resp, err := cli.Get(ctx, keys.PlacementPrefix(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	provs := map[string]*etcdschema.Provider{}
	sums := map[string]map[string]int64{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, keys.Providers()):
			p := &etcdschema.Provider{}
			if err := etcdschema.Decode(k, kv.Value, p); err != nil {
				return err
			}
			provs[p.UUID] = p
		case strings.HasPrefix(k, keys.Consumers()):
			c := &etcdschema.Consumer{}
			if err := etcdschema.Decode(k, kv.Value, c); err != nil {
				return err
			}
			for rp, a := range c.Allocations {
				if sums[rp] == nil {
					sums[rp] = map[string]int64{}
				}
				for rc, n := range a.Resources {
					sums[rp][rc] += n
				}
			}
		}
	}
	for uuid, p := range provs {
		for rc, inv := range p.Inventories {
			if p.Usages[rc] > inv.Capacity() {
				return fmt.Errorf("rev %d: %s uses %d %s of %d", resp.Header.Revision, uuid, p.Usages[rc], rc, inv.Capacity())
			}
			if p.Usages[rc] != sums[uuid][rc] {
				return fmt.Errorf("rev %d: %s records %d %s used, consumers hold %d", resp.Header.Revision, uuid, p.Usages[rc], rc, sums[uuid][rc])
			}
		}
	}
	return nil
}
