package scheduler

import (
	"testing"

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
		return informer.Event{Key: keys.HostMapping("h"), Value: []byte(etcdschema.MustEncode(&etcdschema.HostMapping{Host: "h", Cell: cell}))}
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
