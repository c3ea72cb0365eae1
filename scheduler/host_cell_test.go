package scheduler

import (
	"maps"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// TestViewCellFollowsMappings: a view's cell is the host mapping's while
// there is one, and follows every change to the mappings (the record's
// remembered cell is read again), else the service's.
func TestViewCellFollowsMappings(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	service := informer.Event{Key: keys.Service("h"),
		Decoded: &etcdschema.Service{Host: "h", Cell: "service-cell", ProviderUUID: "rp"}}
	hostsHandler{hm}.Apply([]informer.Event{service})
	mapping := func(cell string) informer.Event {
		key, value := keys.HostMapping("h"), []byte(etcdschema.MustEncode(&etcdschema.HostMapping{Host: "h", Cell: cell}))
		ev := informer.Event{Key: key, Value: value} // as the informer hands it over, decoded
		ev.Decoded, ev.DecodeErr = mappingsHandler{hm}.Decode(key, value)
		return ev
	}
	cellNow := func() string {
		t.Helper()
		views, oks := hm.viewsForProviders([]string{"rp"}, nil, make([]hostView, 1), make([]bool, 1))
		if !oks[0] {
			t.Fatal("no view of rp")
		}
		return views[0].Cell
	}
	steps := []struct {
		desc  string
		apply func()
		want  string
	}{
		{"no mapping: the service's cell", func() {}, "service-cell"},
		{"mapped", func() { mappingsHandler{hm}.Apply([]informer.Event{mapping("cell1")}) }, "cell1"},
		{"read again, unchanged", func() {}, "cell1"},
		{"moved", func() { mappingsHandler{hm}.Apply([]informer.Event{mapping("cell2")}) }, "cell2"},
		{"mappings listed afresh", func() { mappingsHandler{hm}.Reset([]informer.Event{mapping("cell3")}, 1) }, "cell3"},
		{"unmapped", func() {
			mappingsHandler{hm}.Apply([]informer.Event{{Key: keys.HostMapping("h"), Deleted: true}})
		}, "service-cell"},
	}
	for _, st := range steps {
		st.apply()
		if got := cellNow(); got != st.want {
			t.Fatalf("%s: cell %q, want %q", st.desc, got, st.want)
		}
	}
}

// TestViewCellWhicheverComesFirst: a record holds its mapping's cell
// however the two arrive: the mapping before the host's first key (the
// record reads the mappings when it is made), a list of the hosts after
// the mappings (every listed record reads them), a list of the mappings
// after the hosts (every record is set), and a mapping changed while the
// hosts are listed.
func TestViewCellWhicheverComesFirst(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	service := func(host, rp string) informer.Event {
		return informer.Event{Key: keys.Service(host),
			Decoded: &etcdschema.Service{Host: host, Cell: "service-cell", ProviderUUID: rp}}
	}
	mapping := func(host, cell string) informer.Event {
		key, value := keys.HostMapping(host), []byte(etcdschema.MustEncode(&etcdschema.HostMapping{Host: host, Cell: cell}))
		ev := informer.Event{Key: key, Value: value}
		ev.Decoded, ev.DecodeErr = mappingsHandler{hm}.Decode(key, value)
		return ev
	}
	cellOf := func(rp string) string {
		t.Helper()
		views, oks := hm.viewsForProviders([]string{rp}, nil, make([]hostView, 1), make([]bool, 1))
		if !oks[0] {
			t.Fatalf("no view of %s", rp)
		}
		return views[0].Cell
	}
	mappingsHandler{hm}.Apply([]informer.Event{mapping("h1", "cell1")})
	hostsHandler{hm}.Apply([]informer.Event{service("h1", "rp1")})
	if got := cellOf("rp1"); got != "cell1" {
		t.Fatalf("mapping before the service: cell %q, want cell1", got)
	}
	mappingsHandler{hm}.Apply([]informer.Event{mapping("h2", "cell2")})
	hostsHandler{hm}.Reset([]informer.Event{service("h1", "rp1"), service("h2", "rp2"), service("h3", "rp3")}, 2)
	for rp, want := range map[string]string{"rp1": "cell1", "rp2": "cell2", "rp3": "service-cell"} {
		if got := cellOf(rp); got != want {
			t.Fatalf("hosts listed after the mappings: %s's cell %q, want %q", rp, got, want)
		}
	}
	mappingsHandler{hm}.Reset([]informer.Event{mapping("h2", "cell4"), mapping("h3", "cell3")}, 3)
	for rp, want := range map[string]string{"rp1": "service-cell", "rp2": "cell4", "rp3": "cell3"} {
		if got := cellOf(rp); got != want {
			t.Fatalf("mappings listed after the hosts: %s's cell %q, want %q", rp, got, want)
		}
	}
	// A mapping written while the hosts are listed: between the list's
	// pages, which run outside the lock.
	if err := (hostsHandler{hm}).ResetPaged(4, func(page func([]informer.Event)) error {
		page([]informer.Event{service("h1", "rp1")})
		mappingsHandler{hm}.Apply([]informer.Event{mapping("h1", "cell5")})
		page([]informer.Event{service("h2", "rp2")})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for rp, want := range map[string]string{"rp1": "cell5", "rp2": "cell4"} {
		if got := cellOf(rp); got != want {
			t.Fatalf("mapping changed during a hosts list: %s's cell %q, want %q", rp, got, want)
		}
	}
}

// TestMappingsListKeepsNoBorrowedBytes: a list hands the mappings'
// handler borrowed keys (informer.PagedResetter); the host names it keeps
// read as listed after the list's buffer is overwritten.
func TestMappingsListKeepsNoBorrowedBytes(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	var evs []informer.Event
	var bufs [][]byte
	for _, h := range []string{"h1", "h2", "h3"} {
		buf := []byte(keys.HostMapping(h))
		bufs = append(bufs, buf)
		value := []byte(etcdschema.MustEncode(&etcdschema.HostMapping{Host: h, Cell: "cell-" + h}))
		ev := informer.Event{Key: unsafe.String(&buf[0], len(buf)), Value: value}
		ev.Decoded, ev.DecodeErr = mappingsHandler{hm}.Decode(ev.Key, value)
		evs = append(evs, ev)
	}
	if err := (mappingsHandler{hm}).ResetPaged(1, func(page func([]informer.Event)) error {
		page(evs)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range bufs {
		for i := range b {
			b[i] = 'x' // the list's next chunk
		}
	}
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	want := map[string]string{"h1": "cell-h1", "h2": "cell-h2", "h3": "cell-h3"}
	if !maps.Equal(hm.cells, want) {
		t.Fatalf("cells after the list's buffer changed: %v, want %v", hm.cells, want)
	}
}
