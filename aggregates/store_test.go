package aggregates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

type fixture struct {
	t     *testing.T
	ctx   context.Context
	cli   *clientv3.Client
	keys  etcdschema.Keys
	place *placement.Service
	s     *Store
}

// newFixture is a store over real etcd and real placement, with compute
// hosts registered as agents register them.
func newFixture(t *testing.T, hosts ...string) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	p := placement.New(cli, keys, hclog.NewNullLogger())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := p.EnsureProvider(ctx, "rp-"+h, h, ""); err != nil {
			t.Fatal(err)
		}
		svc := &etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: "rp-" + h}
		if _, err := cli.Put(ctx, keys.Service(h), etcdschema.MustEncode(svc)); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{t: t, ctx: ctx, cli: cli, keys: keys, place: p, s: New(cli, keys, p, nil)}
}

func (f *fixture) create(name, zone string) *etcdschema.Aggregate {
	f.t.Helper()
	a, err := f.s.Create(f.ctx, name, zone)
	if err != nil {
		f.t.Fatalf("create %s: %v", name, err)
	}
	return a
}

// TestConcurrentCreatesTakeDistinctIDs creates aggregates all at once:
// the compare on the id counter lets each id be taken once, and a
// deleted aggregate's id is not given again.
func TestConcurrentCreatesTakeDistinctIDs(t *testing.T) {
	f := newFixture(t)
	const n = 12
	ids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := f.s.Create(f.ctx, fmt.Sprintf("a%d", i), "")
			if err != nil {
				t.Errorf("create a%d: %v", i, err)
				return
			}
			ids[i] = a.ID
		}()
	}
	wg.Wait()
	slices.Sort(ids)
	for i, id := range ids {
		if id != i+1 {
			t.Fatalf("ids %v, want 1..%d each once", ids, n)
		}
	}
	if err := f.s.Delete(f.ctx, ByID(n)); err != nil {
		t.Fatal(err)
	}
	if a := f.create("after", ""); a.ID != n+1 {
		t.Errorf("id after deleting the last: %d, want %d (ids are not reused)", a.ID, n+1)
	}
	// A name that still exists: "after" (any of a0..a11 may have been
	// the one with id n, deleted above).
	if _, err := f.s.Create(f.ctx, "after", ""); !errors.As(err, new(*NameExistsError)) {
		t.Errorf("duplicate name: %v", err)
	}
}

// TestRecordsBeforeIDsGetOneOnFirstRead writes aggregates as a build
// before integer ids did (no "id", no counter) and reads them from
// several readers at once: each record gets one id, in creation order,
// the same whoever wins, and the counter continues after them.
func TestRecordsBeforeIDsGetOneOnFirstRead(t *testing.T) {
	f := newFixture(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names := []string{"old-b", "old-a", "old-c"} // created in this order
	for i, name := range names {
		a := &etcdschema.Aggregate{UUID: fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", 9-i), Name: name,
			Hosts: []string{}, Metadata: map[string]string{}, CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		raw := etcdschema.MustEncode(a)
		if strings.Contains(raw, `"id"`) {
			t.Fatalf("an aggregate without an id encodes one: %s", raw)
		}
		if _, err := f.cli.Put(f.ctx, f.keys.Aggregate(a.UUID), raw); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	seen := make([]map[string]int, 4)
	for r := range seen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set, err := f.s.List(f.ctx)
			if err != nil {
				t.Errorf("list: %v", err)
				return
			}
			seen[r] = map[string]int{}
			for _, a := range set.All() {
				seen[r][a.Name] = a.ID
			}
		}()
	}
	wg.Wait()
	want := map[string]int{"old-b": 1, "old-a": 2, "old-c": 3}
	for r, got := range seen {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("reader %d saw ids %v, want %v", r, got, want)
		}
	}
	if a := f.create("new", ""); a.ID != 4 {
		t.Errorf("first id after the old records: %d, want 4", a.ID)
	}
}

func TestHostsZonesAndMirroring(t *testing.T) {
	f := newFixture(t, "h1", "h2")
	az1 := f.create("agg1", "az1")
	plain := f.create("plain", "")
	az2 := f.create("agg2", "az2")

	mirrored := func(host string) []string {
		t.Helper()
		p, err := f.place.Provider(f.ctx, "rp-"+host)
		if err != nil {
			t.Fatal(err)
		}
		return p.Aggregates
	}
	cases := []struct {
		desc string
		do   func() error
		want error // matched with errors.Is, or by type for the typed ones
	}{
		{"unknown host", func() error { _, err := f.s.AddHost(f.ctx, ByID(az1.ID), "nohost"); return err }, ErrHostNotFound},
		{"unknown aggregate", func() error { _, err := f.s.AddHost(f.ctx, ByID(99), "h1"); return err }, ErrNotFound},
		{"add", func() error { _, err := f.s.AddHost(f.ctx, ByID(az1.ID), "h1"); return err }, nil},
		{"add again", func() error { _, err := f.s.AddHost(f.ctx, ByID(az1.ID), "h1"); return err }, ErrHostExists},
		{"no zone, no conflict", func() error { _, err := f.s.AddHost(f.ctx, ByUUID(plain.UUID), "h1"); return err }, nil},
		{"second host", func() error { _, err := f.s.AddHost(f.ctx, ByID(az2.ID), "h2"); return err }, nil},
		{"remove absent", func() error { _, err := f.s.RemoveHost(f.ctx, ByID(az1.ID), "h2"); return err }, ErrHostNotInAggregate},
		{"not empty", func() error { return f.s.Delete(f.ctx, ByID(az1.ID)) }, &NotEmptyError{}},
	}
	for _, c := range cases {
		err := c.do()
		switch want := c.want.(type) {
		case nil:
			if err != nil {
				t.Errorf("%s: %v", c.desc, err)
			}
		case *NotEmptyError:
			if !errors.As(err, &want) {
				t.Errorf("%s: %v, want NotEmptyError", c.desc, err)
			}
		default:
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", c.desc, err, want)
			}
		}
	}
	if got := mirrored("h1"); !slices.Contains(got, az1.UUID) || !slices.Contains(got, plain.UUID) {
		t.Errorf("h1's placement aggregates %v lack %s and %s", got, az1.UUID, plain.UUID)
	}

	// One zone per host: h1 is in az1, so agg2 cannot take it, and plain
	// (holding h1 and, next, h2) cannot become a zone; Others lists each
	// conflicting aggregate's zone in id order, as Nova does.
	_, err := f.s.AddHost(f.ctx, ByID(az2.ID), "h1")
	var zc *ZoneConflictError
	if !errors.As(err, &zc) || fmt.Sprint(zc.Others) != "[az1]" || zc.Host != "h1" {
		t.Errorf("add h1 to az2: %v", err)
	}
	if _, err := f.s.AddHost(f.ctx, ByUUID(plain.UUID), "h2"); err != nil {
		t.Fatal(err)
	}
	z3 := "az3"
	_, err = f.s.SetMetadata(f.ctx, ByUUID(plain.UUID), map[string]*string{etcdschema.AggregateAZKey: &z3})
	if !errors.As(err, &zc) || fmt.Sprint(zc.Others) != "[az1 az2]" {
		t.Errorf("plain into az3: %v, want conflicts [az1 az2]", err)
	}

	// A zone whose host runs a server keeps its name.
	if _, err := f.cli.Put(f.ctx, f.keys.HostInstance("h2", "i1"), "x"); err != nil {
		t.Fatal(err)
	}
	renamed := "az2b"
	_, err = f.s.Update(f.ctx, ByID(az2.ID), nil, &renamed)
	var busy *ServersInZoneError
	if !errors.As(err, &busy) || busy.Host != "h2" || busy.Servers != 1 {
		t.Errorf("rename a zone with a server: %v", err)
	}
	// The name alone may change, and updated_at moves; host changes leave it.
	if az1.UpdatedAt != (time.Time{}) {
		t.Errorf("a new aggregate has updated_at %v", az1.UpdatedAt)
	}
	name := "agg2-renamed"
	out, err := f.s.Update(f.ctx, ByID(az2.ID), &name, nil)
	if err != nil || out.Name != name || out.UpdatedAt.IsZero() {
		t.Fatalf("rename: %+v %v", out, err)
	}

	out, err = f.s.RemoveHost(f.ctx, ByID(az1.ID), "h1")
	if err != nil || len(out.Hosts) != 0 || !out.UpdatedAt.IsZero() {
		t.Fatalf("remove h1: %+v %v", out, err)
	}
	if got := mirrored("h1"); slices.Contains(got, az1.UUID) || !slices.Contains(got, plain.UUID) {
		t.Errorf("h1's placement aggregates after removal: %v", got)
	}
	if err := f.s.Delete(f.ctx, ByID(az1.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Find(f.ctx, ByID(az1.ID)); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted aggregate found: %v", err)
	}
	f.create("agg1", "") // the name is free again
}
