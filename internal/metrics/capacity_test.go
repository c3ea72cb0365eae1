package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// gathered reads a registry into "name{label=value,...}" → value, labels
// in the order Prometheus sorts them.
func gathered(t *testing.T, reg *prometheus.Registry, prefix string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var ls []string
			for _, lp := range mt.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			v := mt.GetGauge().GetValue()
			if mt.GetCounter() != nil {
				v = mt.GetCounter().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

func TestWatchCapacity(t *testing.T) {
	rows := []CapacityRow{
		{Host: "a", Cell: "cell1", Zone: "nova", ResourceClass: "VCPU", Capacity: 64, Used: 8},
		{Host: "a", Cell: "cell1", Zone: "nova", ResourceClass: "MEMORY_MB", Capacity: 16384, Used: 16384},
		{Host: "b", Cell: "cell1", Zone: "nova", ResourceClass: "MEMORY_MB", Capacity: 16384, Used: 20000}, // over: free 0
		{Host: "c", Cell: "cell2", Zone: "az2", ResourceClass: "MEMORY_MB", Capacity: 8192, Used: 0},
		{ResourceClass: "DISK_GB", Capacity: 1000, Used: 10}, // a sharing provider: no host
	}
	src := func(visit func(CapacityRow)) {
		for _, r := range rows {
			visit(r)
		}
	}
	cases := []struct {
		desc    string
		perHost bool
		want    map[string]float64
	}{
		{"sums only", false, map[string]float64{
			"berth_resource_capacity{availability_zone=nova,cell=cell1,resource_class=VCPU}":      64,
			"berth_resource_used{availability_zone=nova,cell=cell1,resource_class=VCPU}":          8,
			"berth_resource_free{availability_zone=nova,cell=cell1,resource_class=VCPU}":          56,
			"berth_resource_capacity{availability_zone=nova,cell=cell1,resource_class=MEMORY_MB}": 32768,
			"berth_resource_used{availability_zone=nova,cell=cell1,resource_class=MEMORY_MB}":     36384,
			"berth_resource_free{availability_zone=nova,cell=cell1,resource_class=MEMORY_MB}":     0,
			"berth_resource_capacity{availability_zone=az2,cell=cell2,resource_class=MEMORY_MB}":  8192,
			"berth_resource_used{availability_zone=az2,cell=cell2,resource_class=MEMORY_MB}":      0,
			"berth_resource_free{availability_zone=az2,cell=cell2,resource_class=MEMORY_MB}":      8192,
			"berth_resource_capacity{availability_zone=,cell=,resource_class=DISK_GB}":            1000,
			"berth_resource_used{availability_zone=,cell=,resource_class=DISK_GB}":                10,
			"berth_resource_free{availability_zone=,cell=,resource_class=DISK_GB}":                990,
		}},
		{"per host as well", true, map[string]float64{
			"berth_host_resource_capacity{availability_zone=nova,cell=cell1,host=a,resource_class=VCPU}":      64,
			"berth_host_resource_free{availability_zone=nova,cell=cell1,host=a,resource_class=VCPU}":          56,
			"berth_host_resource_used{availability_zone=nova,cell=cell1,host=a,resource_class=VCPU}":          8,
			"berth_host_resource_capacity{availability_zone=nova,cell=cell1,host=a,resource_class=MEMORY_MB}": 16384,
			"berth_host_resource_free{availability_zone=nova,cell=cell1,host=a,resource_class=MEMORY_MB}":     0,
			"berth_host_resource_used{availability_zone=nova,cell=cell1,host=a,resource_class=MEMORY_MB}":     16384,
			"berth_host_resource_capacity{availability_zone=nova,cell=cell1,host=b,resource_class=MEMORY_MB}": 16384,
			"berth_host_resource_free{availability_zone=nova,cell=cell1,host=b,resource_class=MEMORY_MB}":     0,
			"berth_host_resource_used{availability_zone=nova,cell=cell1,host=b,resource_class=MEMORY_MB}":     20000,
			"berth_host_resource_capacity{availability_zone=az2,cell=cell2,host=c,resource_class=MEMORY_MB}":  8192,
			"berth_host_resource_free{availability_zone=az2,cell=cell2,host=c,resource_class=MEMORY_MB}":      8192,
			"berth_host_resource_used{availability_zone=az2,cell=cell2,host=c,resource_class=MEMORY_MB}":      0,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			m := New()
			m.WatchCapacity(src, tc.perHost)
			prefix := "berth_resource_"
			if tc.perHost {
				prefix = "berth_host_resource_"
			}
			if diff := cmp.Diff(tc.want, gathered(t, m.Registry(), prefix)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !tc.perHost && len(gathered(t, m.Registry(), "berth_host_resource_")) != 0 {
				t.Errorf("per-host series without the option")
			}
		})
	}
}

func TestServerCountsOnlyWhileLeading(t *testing.T) {
	m := New()
	m.Leading(true)
	m.SetServerCounts(map[ServerKey]int{{Status: "ACTIVE", Cell: "cell1"}: 3, {Status: "ERROR", Cell: "cell0"}: 1})
	want := map[string]float64{"berth_servers{cell=cell1,status=ACTIVE}": 3, "berth_servers{cell=cell0,status=ERROR}": 1}
	if diff := cmp.Diff(want, gathered(t, m.Registry(), "berth_servers")); diff != "" {
		t.Errorf("while leading (-want +got):\n%s", diff)
	}
	m.Leading(false)
	if got := gathered(t, m.Registry(), "berth_servers"); len(got) != 0 {
		t.Errorf("a deposed leader still exports %v", got)
	}
}

func TestBuildInfoAndScheduled(t *testing.T) {
	m := New()
	m.Scheduled(ScheduledNoValidHost, 60)
	m.Scheduled(ScheduledHandedOff, 1)
	got := gathered(t, m.Registry(), "berth_")
	v, r, g := BuildInfo()
	if g == "" || v == "" || r == "" {
		t.Errorf("build info %q %q %q has an empty part", v, r, g)
	}
	for k, want := range map[string]float64{
		"berth_build_info{go_version=" + g + ",revision=" + r + ",version=" + v + "}": 1,
		"berth_superconductor_instances_total{outcome=no_valid_host}":                 60,
		"berth_superconductor_instances_total{outcome=handed_off}":                    1,
		"berth_superconductor_instances_total{outcome=error}":                         0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}

// BenchmarkCapacityScrape is one scrape's work at 10,000 hosts in 4 cells
// and 8 zones, three classes each: the sums, and with the per-host option
// the 90,000 per-host series as well.
func BenchmarkCapacityScrape(b *testing.B) {
	rows := make([]CapacityRow, 0, 30000)
	for i := 0; i < 10000; i++ {
		for _, rc := range []string{"VCPU", "MEMORY_MB", "DISK_GB"} {
			rows = append(rows, CapacityRow{Host: fmt.Sprintf("host%05d", i), Cell: fmt.Sprintf("cell%d", i%4),
				Zone: fmt.Sprintf("az%d", i%8), ResourceClass: rc, Capacity: 1000, Used: int64(i % 1000)})
		}
	}
	src := func(visit func(CapacityRow)) {
		for _, r := range rows {
			visit(r)
		}
	}
	for _, perHost := range []bool{false, true} {
		b.Run(fmt.Sprintf("per_host=%v", perHost), func(b *testing.B) {
			m := New()
			m.WatchCapacity(src, perHost)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := m.Registry().Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
