package scheduler

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// TestServiceRecordsShareStrings: the host manager keeps one copy of the
// cell and agent version every service record repeats, and the record's
// host is its host record's name; the provider uuid stays the host's
// own, and every value reads as decoded.
func TestServiceRecordsShareStrings(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	h := hostsHandler{hm}
	var evs []informer.Event
	for _, host := range []string{"h1", "h2"} {
		key, value := keys.Service(host), []byte(etcdschema.MustEncode(&etcdschema.Service{Host: host, Cell: "cell1",
			ProviderUUID: "rp-" + host, AgentVersion: "26.0.1"}))
		ev := informer.Event{Key: key, Value: value}
		ev.Decoded, ev.DecodeErr = h.Decode(key, value)
		evs = append(evs, ev)
	}
	h.Apply(evs)
	r1, r2 := hm.hosts["h1"], hm.hosts["h2"]
	s1, s2 := r1.service, r2.service
	if s1.Host != "h1" || s1.Cell != "cell1" || s1.AgentVersion != "26.0.1" || s1.ProviderUUID != "rp-h1" || s2.ProviderUUID != "rp-h2" {
		t.Fatalf("service records %+v, %+v", s1, s2)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(s1.Cell, s2.Cell) || !same(s1.AgentVersion, s2.AgentVersion) {
		t.Error("two hosts' service records hold copies of their cell or agent version of their own")
	}
	if !same(s1.Host, r1.name) || !same(s2.Host, r2.name) {
		t.Error("a service record's host is not its host record's name")
	}
}

// TestCapacityReportsHoldNoEmptyUsage: a host record keeps its capacity
// report's maps only: an idle host's usage is no map (read as zero),
// equal hosts' inventories and usages are one map each, and a busy
// host's usage reads as reported.
func TestCapacityReportsHoldNoEmptyUsage(t *testing.T) {
	keys := etcdschema.New("/t")
	hm := NewHostManager(nil, keys, hclog.NewNullLogger())
	h := hostsHandler{hm}
	inv := map[string]etcdschema.Inventory{"VCPU": {Total: 8, AllocationRatio: 1}}
	var evs []informer.Event
	for host, used := range map[string]map[string]int64{"idle": {}, "busy": {"VCPU": 2}, "busy2": {"VCPU": 2}} {
		key, value := keys.HostCapacity(host), []byte(etcdschema.MustEncode(&etcdschema.HostCapacity{Host: host, Inventories: inv, Used: used}))
		ev := informer.Event{Key: key, Value: value}
		ev.Decoded, ev.DecodeErr = h.Decode(key, value)
		evs = append(evs, ev)
	}
	h.Apply(evs)
	idle, busy, busy2 := hm.hosts["idle"].capacity, hm.hosts["busy"].capacity, hm.hosts["busy2"].capacity
	if !idle.reported || idle.used != nil || idle.used["VCPU"] != 0 {
		t.Errorf("idle host's capacity %+v, want reported with no usage map", idle)
	}
	if !busy.reported || busy.used["VCPU"] != 2 || busy.inventories["VCPU"].Total != 8 {
		t.Errorf("busy host's capacity %+v", busy)
	}
	mapID := func(m any) uintptr { return reflect.ValueOf(m).Pointer() }
	if mapID(busy.used) != mapID(busy2.used) || mapID(busy.inventories) != mapID(idle.inventories) {
		t.Error("equal hosts' usages or inventories are maps of their own")
	}
	del := informer.Event{Key: keys.HostCapacity("busy"), Deleted: true}
	h.Apply([]informer.Event{del})
	if hm.hosts["busy"].capacity.reported {
		t.Error("a deleted capacity report still reads as reported")
	}
}
