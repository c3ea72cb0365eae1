package scheduler

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// TestReadyViewFollowsChanges: the view a request reads is the record's
// after every kind of change, each read twice: ready fields a change
// left behind would schedule on a host's old state.
func TestReadyViewFollowsChanges(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	service := func(failed int, forcedDown bool) informer.Event {
		return informer.Event{Key: keys.Service("h"), Decoded: &etcdschema.Service{Host: "h", Cell: "service-cell",
			ProviderUUID: "rp", FailedBuilds: failed, ForcedDown: forcedDown}}
	}
	instance := func(uuid string) informer.Event {
		return informer.Event{Key: keys.HostInstance("h", uuid), Revision: 10,
			Decoded: &etcdschema.InstanceInfo{UUID: uuid, Host: "h", FlavorID: "1"}}
	}
	build := informer.Event{Key: keys.Build("h", "i9"), Decoded: &etcdschema.BuildOp{Op: etcdschema.OpBuild}}
	sync := func(uuids ...string) informer.Event {
		// A sync is decoded when applied (it shares the held uuids), so
		// the event carries its bytes as the informer hands them.
		return informer.Event{Key: keys.HostSync("h"),
			Value: []byte(etcdschema.MustEncode(&etcdschema.HostSync{Host: "h", UUIDs: uuids}))}
	}
	hosts := func(evs ...informer.Event) func() { return func() { hostsHandler{hm}.Apply(evs) } }
	// The informer hands Apply what the handler's Decode made.
	mapping := func(evs ...informer.Event) func() {
		return func() {
			for i := range evs {
				d, err := mappingsHandler{hm}.Decode(evs[i].Key, evs[i].Value)
				if err != nil {
					t.Fatalf("decode mapping: %v", err)
				}
				evs[i].Decoded = d
			}
			mappingsHandler{hm}.Apply(evs)
		}
	}
	type want struct {
		known            bool
		cell             string
		up, updated      bool
		instances, ioOps int
		failedBuilds     int
	}
	steps := []struct {
		desc  string
		apply func()
		want  want
	}{
		{"no host", func() {}, want{}},
		{"service", hosts(service(0, false)), want{known: true, cell: "service-cell"}},
		{"alive", hosts(informer.Event{Key: keys.Alive("h")}), want{known: true, cell: "service-cell", up: true}},
		{"an instance", hosts(instance("i1")), want{known: true, cell: "service-cell", up: true, instances: 1}},
		{"synced", hosts(sync("i1")), want{known: true, cell: "service-cell", up: true, updated: true, instances: 1}},
		{"a sync that differs", hosts(sync("i1", "i2")), want{known: true, cell: "service-cell", up: true, instances: 1}},
		{"the instance it lacked", hosts(instance("i2"), sync("i1", "i2")),
			want{known: true, cell: "service-cell", up: true, instances: 2}},
		{"a build in flight", hosts(build), want{known: true, cell: "service-cell", up: true, instances: 2, ioOps: 1}},
		{"build done", hosts(informer.Event{Key: build.Key, Deleted: true}),
			want{known: true, cell: "service-cell", up: true, instances: 2}},
		{"failed builds", hosts(service(3, false)), want{known: true, cell: "service-cell", up: true, instances: 2, failedBuilds: 3}},
		{"forced down", hosts(service(3, true)), want{known: true, cell: "service-cell", instances: 2, failedBuilds: 3}},
		{"mapped", mapping(informer.Event{Key: keys.HostMapping("h"),
			Value: []byte(etcdschema.MustEncode(&etcdschema.HostMapping{Host: "h", Cell: "cell1"}))}),
			want{known: true, cell: "cell1", instances: 2, failedBuilds: 3}},
		{"instance gone", hosts(informer.Event{Key: keys.HostInstance("h", "i1"), Revision: 11, Deleted: true}),
			want{known: true, cell: "cell1", instances: 1, failedBuilds: 3}},
		{"listed afresh", func() {
			hostsHandler{hm}.Reset([]informer.Event{instance("i3"), service(2, false), {Key: keys.Alive("h")}}, 20)
		}, want{known: true, cell: "cell1", up: true, instances: 1, failedBuilds: 2}},
		{"service deleted", hosts(informer.Event{Key: keys.Service("h"), Deleted: true}), want{}},
	}
	for _, st := range steps {
		st.apply()
		for read := 0; read < 2; read++ {
			views, oks := hm.viewsForProviders([]string{"rp"}, []int32{1}, make([]hostView, 1), make([]bool, 1))
			v := &views[0]
			var got want
			if oks[0] {
				got = want{known: true, cell: v.Cell, up: v.Up, updated: v.Updated, instances: v.NumInstances,
					ioOps: v.IOOps, failedBuilds: v.FailedBuilds}
				if v.NameHash != hostNameHash("h") {
					t.Fatalf("%s: name hash %d, want hostNameHash's %d", st.desc, v.NameHash, hostNameHash("h"))
				}
				if len(v.Instances) != v.NumInstances {
					t.Fatalf("%s: %d instances counted, %d in the map", st.desc, v.NumInstances, len(v.Instances))
				}
			}
			if got != st.want {
				t.Fatalf("%s (read %d): view %+v, want %+v", st.desc, read, got, st.want)
			}
		}
	}
}
