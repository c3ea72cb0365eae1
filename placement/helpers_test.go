package placement

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// testCtx bounds a test's etcd calls so a hang fails instead of stalling.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStarted returns a started Service on a fresh embedded etcd.
func newStarted(t testing.TB) (*Service, *clientv3.Client) {
	t.Helper()
	cli := etcdtest.Client(t)
	s := startOn(t, cli)
	return s, cli
}

func startOn(t testing.TB, cli *clientv3.Client) *Service {
	t.Helper()
	return startWith(t, cli, (*Service).Start)
}

// startWith is a service on cli (prefix /test, warnings to the test's
// log) started by start (Start, StartDeferred or StartOnDemand with
// their after), its context ended when the test ends.
func startWith(t testing.TB, cli *clientv3.Client, start func(*Service, context.Context) error) *Service {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	s := New(cli, etcdschema.New("/test"), log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := start(s, ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	return s
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func inv(total int64) etcdschema.Inventory {
	return etcdschema.Inventory{Total: total, MinUnit: 1, MaxUnit: total, StepSize: 1, AllocationRatio: 1}
}

// mkProvider creates a provider with the given inventories and traits.
func mkProvider(t testing.TB, s *Service, uuid, parent string, invs map[string]etcdschema.Inventory, traits ...string) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.CreateProvider(ctx, uuid, "name-"+uuid, parent); err != nil {
		t.Fatalf("create %s: %v", uuid, err)
	}
	if len(invs) == 0 && len(traits) == 0 {
		return
	}
	if err := s.UpdateProvider(ctx, uuid, func(p *etcdschema.Provider) error {
		for rc, i := range invs {
			p.Inventories[rc] = i
		}
		p.Traits = append(p.Traits, traits...)
		return nil
	}); err != nil {
		t.Fatalf("update %s: %v", uuid, err)
	}
}

// sync waits until the index has every write made so far.
func syncIdx(t testing.TB, s *Service) {
	t.Helper()
	if err := s.syncIndex(testCtx(t)); err != nil {
		t.Fatalf("sync index: %v", err)
	}
}

func alloc(rp string, res map[string]int64) map[string]ProviderAllocation {
	return map[string]ProviderAllocation{rp: {Resources: res}}
}

func gen(n int64) *int64 { return &n }

// consumerLinks is st's provider-consumer links as sets, to compare two
// states whatever order their links were made in.
func consumerLinks(st *indexState) map[string]map[string]struct{} {
	out := make(map[string]map[string]struct{}, len(st.rpConsumers))
	for rp, cs := range st.rpConsumers {
		m := map[string]struct{}{}
		for u := range cs.all {
			m[u] = struct{}{}
		}
		out[rp] = m
	}
	return out
}

// linked says whether st links consumer c to provider rp.
func linked(st *indexState, rp, c string) bool {
	cs := st.rpConsumers[rp]
	return cs != nil && cs.has(c)
}
