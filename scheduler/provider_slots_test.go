package scheduler

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/placement"
)

// TestViewsBySlotFollowHosts: a view found through the slot table is the
// one byProvider gives, through every change that alters byProvider's
// answer for a remembered uuid (a service deleted, a provider moving to
// another host, a host's provider changing, a list replacing every
// record) and through a slot placement reuses for another provider or
// that another index numbers differently.
func TestViewsBySlotFollowHosts(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	service := func(host, rp string) informer.Event {
		return informer.Event{Key: keys.Service(host),
			Decoded: &etcdschema.Service{Host: host, Cell: "cell1", ProviderUUID: rp}}
	}
	apply := func(evs ...informer.Event) func() { return func() { hostsHandler{hm}.Apply(evs) } }
	deleted := informer.Event{Key: keys.Service("h1"), Deleted: true}
	// hostOf asks for rp at slot through the table, twice (the second
	// read finds what the first remembered), and checks both against a
	// read without a slot.
	hostOf := func(rp string, slot int32) string {
		t.Helper()
		var got [3]string
		for i, s := range []int32{slot, slot, 0} {
			views, oks := hm.viewsForProviders([]string{rp}, []int32{s}, make([]hostView, 1), make([]bool, 1))
			if oks[0] {
				got[i] = views[0].Host
			}
		}
		if got[0] != got[2] || got[1] != got[2] {
			t.Fatalf("rp %s at slot %d: views %q, without the slot %q", rp, slot, got[:2], got[2])
		}
		if got[2] != "" && hm.slots.lookup(slot, rp) == nil {
			t.Fatalf("rp %s at slot %d: not remembered", rp, slot)
		}
		return got[2]
	}
	// A copy of the uuid with bytes of its own: another index's string.
	fresh := func(s string) string { return strings.Clone(s) }
	steps := []struct {
		desc  string
		apply func()
		rp    string
		slot  int32
		want  string
	}{
		{"registered", apply(service("h1", "rp1"), service("h2", "rp2")), "rp1", 1, "h1"},
		{"another slot", func() {}, "rp2", 2, "h2"},
		{"remembered", func() {}, "rp1", 1, "h1"},
		{"the same uuid in bytes of its own", func() {}, fresh("rp1"), 1, "h1"},
		{"slot reused for another provider", func() {}, "rp2", 1, "h2"},
		{"the first provider at a new slot", func() {}, "rp1", 7, "h1"},
		{"a new host keeps the table", apply(service("h3", "rp3")), "rp1", 7, "h1"},
		{"service deleted", apply(deleted), "rp1", 7, ""},
		{"back", apply(service("h1", "rp1")), "rp1", 7, "h1"},
		{"provider taken by another host", apply(service("h3", "rp1")), "rp1", 7, "h3"},
		// byProvider forgets rp1 altogether (h1 lost it to h3 above).
		{"host's provider changed", apply(service("h3", "rp9")), "rp1", 7, ""},
		{"listed afresh", func() { hostsHandler{hm}.Reset([]informer.Event{service("h4", "rp1")}, 1) }, "rp1", 7, "h4"},
		{"slot far past the table", func() {}, "rp1", 5000, "h4"},
		{"no such provider", func() {}, "rp-none", 3, ""},
	}
	for _, st := range steps {
		st.apply()
		if got := hostOf(st.rp, st.slot); got != st.want {
			t.Fatalf("%s: rp %s at slot %d on host %q, want %q", st.desc, st.rp, st.slot, got, st.want)
		}
	}
}

// TestDistinctRoots: the roots of an answer, each once in answer order,
// and each candidate's place among them, alike whether told apart by
// slot or (a candidate without one) by uuid.
func TestDistinctRoots(t *testing.T) {
	cases := []struct {
		desc  string
		roots []string
		slots []int32
		want  []string
		idx   []int
	}{
		{"distinct", []string{"a", "b", "c"}, []int32{3, 1, 2}, []string{"a", "b", "c"}, []int{0, 1, 2}},
		{"repeated apart", []string{"a", "b", "a", "c", "b"}, []int32{5, 9, 5, 1, 9},
			[]string{"a", "b", "c"}, []int{0, 1, 0, 2, 1}},
		{"no root", []string{"a", "", "a"}, []int32{4, 0, 4}, []string{"a"}, []int{0, -1, 0}},
		{"one without a slot: by uuid", []string{"a", "b", "a"}, []int32{4, 0, 4}, []string{"a", "b"}, []int{0, 1, 0}},
		{"colliding slots", []string{"a", "b", "c", "a"}, []int32{1, 1 + 8, 1 + 16, 1}, []string{"a", "b", "c"}, []int{0, 1, 2, 0}},
		{"none", nil, nil, []string{}, []int{}},
	}
	// Many roots with repeats, past any small table.
	var many []string
	var manySlots []int32
	var manyIdx []int
	var manyWant []string
	for i := 0; i < 3000; i++ {
		r := i % 1100
		many, manySlots, manyIdx = append(many, fmt.Sprint("rp", r)), append(manySlots, int32(r*37+1)), append(manyIdx, r)
		if i < 1100 {
			manyWant = append(manyWant, fmt.Sprint("rp", r))
		}
	}
	cases = append(cases, struct {
		desc  string
		roots []string
		slots []int32
		want  []string
		idx   []int
	}{"many", many, manySlots, manyWant, manyIdx})
	sc := getJoinScratch()
	defer sc.release()
	for _, c := range cases {
		cands := make([]placement.Candidate, len(c.roots))
		for i := range cands {
			cands[i].Root, cands[i].RootSlot = c.roots[i], c.slots[i]
		}
		idx := make([]int, len(cands))
		roots, _ := sc.distinctRoots(cands, idx)
		if fmt.Sprint(roots) != fmt.Sprint(c.want) || fmt.Sprint(idx) != fmt.Sprint(c.idx) {
			t.Errorf("%s: roots %v idx %v, want %v %v", c.desc, roots, idx, c.want, c.idx)
		}
		sc.roots = roots
	}
}

// TestViewsBySlotConcurrent: requests reading views through the slot
// table while the watch moves providers between hosts, deletes services
// and lists afresh (run with -race). Provider rp<i> only ever belongs to
// host a<i> or b<i>, and the slots are shuffled between readers, so a
// view that names any other host came from a stale or misread entry.
func TestViewsBySlotConcurrent(t *testing.T) {
	const n = 64
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	service := func(host, rp string) informer.Event {
		return informer.Event{Key: keys.Service(host),
			Decoded: &etcdschema.Service{Host: host, Cell: "cell1", ProviderUUID: rp}}
	}
	rps := make([]string, n)
	var initial []informer.Event
	for i := range rps {
		rps[i] = fmt.Sprint("rp", i)
		initial = append(initial, service(fmt.Sprint("a", i), rps[i]))
	}
	hostsHandler{hm}.Reset(initial, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			views, oks, slots := make([]hostView, n), make([]bool, n), make([]int32, n)
			for round := 0; ; round++ {
				select {
				case <-done:
					return
				default:
				}
				for i := range slots {
					// Each provider at one of two slots, as a reused or
					// renumbered slot would be.
					slots[i] = int32(1 + (i+round*w)%(2*n))
				}
				clear(oks)
				hm.viewsForProviders(rps, slots, views, oks)
				for i, ok := range oks {
					if !ok {
						continue
					}
					if h := views[i].Host; h != fmt.Sprint("a", i) && h != fmt.Sprint("b", i) {
						errs <- fmt.Errorf("round %d: %s on host %s", round, rps[i], h)
						return
					}
				}
			}
		}(w)
	}
	for step := 0; step < 2000; step++ {
		i := step % n
		switch step % 5 {
		case 0:
			hostsHandler{hm}.Apply([]informer.Event{service(fmt.Sprint("b", i), rps[i])})
		case 1:
			hostsHandler{hm}.Apply([]informer.Event{{Key: keys.Service(fmt.Sprint("b", i)), Deleted: true}})
		case 2:
			hostsHandler{hm}.Apply([]informer.Event{service(fmt.Sprint("a", i), rps[i])})
		case 3:
			hostsHandler{hm}.Apply([]informer.Event{{Key: keys.Service(fmt.Sprint("a", i)), Deleted: true}})
		case 4:
			if step%100 == 4 {
				hostsHandler{hm}.Reset(initial, int64(step))
			}
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSlotEntriesDistinct: the entries one request stores come from
// shared allocations, and each keeps what it was given however many
// more are handed out after it.
func TestSlotEntriesDistinct(t *testing.T) {
	var spare slotEntries
	const n = 3*slotEntryBatchMax + 5
	recs := make([]hostRecord, n)
	got := make([]*slotEntry, n)
	for i := range got {
		got[i] = spare.next(fmt.Sprintf("rp-%d", i), &recs[i], n-i)
	}
	seen := map[*slotEntry]bool{}
	for i, e := range got {
		if seen[e] {
			t.Fatalf("entry %d handed out twice", i)
		}
		seen[e] = true
		if want := fmt.Sprintf("rp-%d", i); e.root != want || e.rec != &recs[i] {
			t.Fatalf("entry %d: root %q rec %p, want %q %p", i, e.root, e.rec, want, &recs[i])
		}
	}
	if spare.made != n { // the last allocation is cut to what is left
		t.Fatalf("%d entries allocated for %d", spare.made, n)
	}
}

// entries is the number of slots the table holds an entry for.
func (t *providerSlots) entries() int {
	d := t.dir.Load()
	if d == nil {
		return 0
	}
	n := 0
	for _, c := range *d {
		for i := range c {
			if c[i].Load() != nil {
				n++
			}
		}
	}
	return n
}
