package placement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestRevisionReadsNeverServeAnEarlierRead: callers arriving while a read
// is in flight share the next read, never the one in flight, and one
// read serves them all.
func TestRevisionReadsNeverServeAnEarlierRead(t *testing.T) {
	var reads atomic.Int64
	release := make(chan struct{})
	r := &revisionReads{timeout: time.Minute, read: func(ctx context.Context) (int64, error) {
		n := reads.Add(1)
		if n == 1 {
			<-release // the first read is slow
		}
		return n * 100, nil
	}}
	ctx := testCtx(t)
	first := make(chan int64, 1)
	go func() { rev, _ := r.revision(ctx); first <- rev }()
	testwait.Until(t, "the first read in flight", func() bool { return reads.Load() == 1 })

	const late = 5
	got := make(chan int64, late)
	for range late {
		go func() { rev, _ := r.revision(ctx); got <- rev }()
	}
	testwait.Until(t, "every late caller waiting on the next read", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.next != nil && r.next.waiters == late
	})
	close(release)
	if rev := <-first; rev != 100 {
		t.Errorf("first caller got revision %d, want the first read's 100", rev)
	}
	for range late {
		if rev := <-got; rev != 200 {
			t.Errorf("a caller that came during the first read got revision %d, want the second read's 200", rev)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2 (one shared by the late callers)", n)
	}
	// A caller alone reads again.
	if rev, err := r.revision(ctx); err != nil || rev != 300 {
		t.Errorf("a lone caller got %d, %v; want a read of its own (300)", rev, err)
	}
}

// TestRevisionReadsCallerGivesUp: a caller whose context ends gets its
// error at once, and the read it shared still answers the others.
func TestRevisionReadsCallerGivesUp(t *testing.T) {
	var reads atomic.Int64
	release := make(chan struct{})
	r := &revisionReads{timeout: time.Minute, read: func(ctx context.Context) (int64, error) {
		<-release
		return reads.Add(1) * 100, nil
	}}
	first := make(chan int64, 1)
	go func() { rev, _ := r.revision(testCtx(t)); first <- rev }()
	testwait.Until(t, "the first read in flight", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cur != nil
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() { _, err := r.revision(ctx); errc <- err }()
	other := make(chan int64, 1)
	go func() { rev, _ := r.revision(testCtx(t)); other <- rev }()
	testwait.Until(t, "two callers on the next read", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.next != nil && r.next.waiters == 2
	})
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Errorf("the caller that gave up got %v, want context.Canceled", err)
	}
	close(release)
	if rev := <-first; rev != 100 {
		t.Errorf("the first caller got %d, want 100", rev)
	}
	if rev := <-other; rev != 200 {
		t.Errorf("the other caller got %d, want the shared second read's 200", rev)
	}
}

// TestSyncIndexReadYourWritesUnderConcurrency: callers that each write a
// provider straight to etcd (as another server would) and then sync, many at once (so most syncs
// share a read), always find the index at or past their own write.
func TestSyncIndexReadYourWritesUnderConcurrency(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				uuid := fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", w, i)
				resp, err := cli.Put(ctx, s.keys.Provider(uuid), providerJSON(uuid))
				if err != nil {
					errs <- err
					return
				}
				if err := s.SyncIndex(ctx); err != nil {
					errs <- err
					return
				}
				if got := s.IndexRevision(); got < resp.Header.Revision {
					errs <- fmt.Errorf("after writing at %d the synced index is at %d", resp.Header.Revision, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// providerJSON is a lone compute provider's record, as another
// placement server would write it.
func providerJSON(uuid string) string {
	return etcdschema.MustEncode(&etcdschema.Provider{UUID: uuid, Name: uuid, RootProviderUUID: uuid,
		Inventories: map[string]etcdschema.Inventory{VCPU: inv(8)}, Usages: map[string]int64{},
		Traits: []string{}, Aggregates: []string{}})
}
