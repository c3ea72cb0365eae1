package conductor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/scheduler"
)

type fixedTargets []scheduler.Target

func (f fixedTargets) Targets() []scheduler.Target { return f }

// TestSelectFailsOverWithoutOrphaningClaims asks, in turn, a scheduler
// that is not there, one that claims and then never answers (it dies mid
// request), and a working one. The working one's answer is used, and the
// only allocations left are the ones its Selections name.
func TestSelectFailsOverWithoutOrphaningClaims(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	log := hclog.NewNullLogger()
	place := placement.New(cli, keys, log)
	if err := place.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hm := scheduler.NewHostManager(cli, keys, log)
	go hm.Run(ctx)
	var rev int64
	for _, h := range []string{"a", "b"} {
		rp := "rp-" + h
		if err := place.EnsureProvider(ctx, rp, h, ""); err != nil {
			t.Fatal(err)
		}
		err := place.UpdateProvider(ctx, rp, func(p *etcdschema.Provider) error {
			p.Inventories = map[string]etcdschema.Inventory{
				placement.VCPU:     {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
				placement.MemoryMB: {Total: 8192, MinUnit: 1, MaxUnit: 8192, StepSize: 1, AllocationRatio: 1},
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpPut(keys.Service(h), etcdschema.MustEncode(&etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: rp})),
			clientv3.OpPut(keys.Alive(h), etcdschema.MustEncode(&etcdschema.Alive{Host: h})),
			clientv3.OpPut(keys.HostMapping(h), etcdschema.MustEncode(&etcdschema.HostMapping{Host: h, Cell: "cell1"})),
		).Commit()
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if err := place.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Poll(t, testwait.Timeout, "the host manager to see hosts a and b", func() (bool, string) {
		_, okA := hm.HostForProvider("rp-a")
		_, okB := hm.HostForProvider("rp-b")
		return okA && okB, fmt.Sprintf("a seen %v, b seen %v", okA, okB)
	})
	sched, err := scheduler.New(scheduler.DefaultConfig(), place, hm, log)
	if err != nil {
		t.Fatal(err)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connection refused
	claimed := make(chan struct{}, 1)
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Claim for real, then never answer: the caller times out.
		rec := httptest.NewRecorder()
		sched.Handler().ServeHTTP(rec, r)
		claimed <- struct{}{}
		<-r.Context().Done()
	}))
	defer dying.Close()
	working := httptest.NewServer(sched.Handler())
	defer working.Close()

	sc := &Superconductor{log: log, cfg: SuperconductorConfig{Placement: place, SelectTimeout: 2 * time.Second,
		Schedulers: fixedTargets{
			{Name: "gone", Selector: &scheduler.Remote{URL: gone.URL}},
			{Name: "dying", Selector: &scheduler.Remote{URL: dying.URL}},
			{Name: "working", Selector: &scheduler.Remote{URL: working.URL}},
		}}}
	spec := &scheduler.RequestSpec{InstanceUUIDs: []string{"i1", "i2", "i3"}, ProjectID: "p", UserID: "u",
		Flavor: etcdschema.Flavor{Name: "f", VCPUs: 2, RAMMB: 512}}
	sels, err := sc.selectDestinations(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-claimed:
	default:
		t.Fatal("the dying scheduler never claimed; the test did not exercise a mid-request death")
	}
	var used int64
	for _, h := range []string{"a", "b"} {
		p, err := place.Provider(ctx, "rp-"+h)
		if err != nil {
			t.Fatal(err)
		}
		used += p.Usages[placement.VCPU]
	}
	if used != 6 {
		t.Fatalf("%d VCPU allocated for 3 instances of 2: claims were orphaned or doubled", used)
	}
	for i, u := range spec.InstanceUUIDs {
		c, err := place.GetAllocations(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Allocations[sels[i][0].ComputeNodeUUID]; !ok || len(c.Allocations) != 1 {
			t.Fatalf("%s holds %v, but its Selection is %s", u, c.Allocations, sels[i][0].ComputeNodeUUID)
		}
	}
}

func TestSelectWithNoSchedulerSaysSo(t *testing.T) {
	sc := &Superconductor{log: hclog.NewNullLogger(), cfg: SuperconductorConfig{Schedulers: fixedTargets{}}}
	_, err := sc.selectDestinations(context.Background(), &scheduler.RequestSpec{InstanceUUIDs: []string{"x"}})
	if err == nil {
		t.Fatal("no error with no scheduler")
	}
}
