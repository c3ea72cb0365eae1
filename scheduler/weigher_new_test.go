package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func weighOrder(t *testing.T, weights map[string]float64, c *Cycle, hosts ...*HostState) []string {
	t.Helper()
	ws, err := NewWeighers(weights)
	if err != nil {
		t.Fatal(err)
	}
	return order(weighHosts(ws, hosts, c))
}

func named(name string, h *HostState) *HostState { h.Host = name; return h }

func TestNewWeighers(t *testing.T) {
	busy := named("busy", hostRes("", 1000, 10, 0, 0))
	busy.NumIOOps = 5
	idle := named("idle", hostRes("", 1000, 10, 0, 0))
	some := named("some", hostRes("", 1000, 10, 0, 0))
	some.NumIOOps = 1

	soft := func(policy string) *Cycle {
		c := newCycle(&RequestSpec{})
		c.Group = group(policy, 0, map[string][]string{"two": {"m1", "m2"}, "one": {"m3"}})
		return c
	}
	two, one, none := named("two", hostRes("", 1, 1, 0, 0)), named("one", hostRes("", 1, 1, 0, 0)), named("none", hostRes("", 1, 1, 0, 0))

	cases := []struct {
		desc    string
		weights map[string]float64
		cycle   *Cycle
		hosts   []*HostState
		want    []string
	}{
		{"io_ops at Nova's -1 avoids busy hosts", map[string]float64{"io_ops": -1}, newCycle(&RequestSpec{}),
			[]*HostState{busy, some, idle}, []string{"idle", "some", "busy"}},
		{"io_ops positive prefers them", map[string]float64{"io_ops": 1}, newCycle(&RequestSpec{}),
			[]*HostState{idle, some, busy}, []string{"busy", "some", "idle"}},
		{"soft-affinity packs onto members", map[string]float64{"soft_affinity": 1}, soft(etcdschema.PolicySoftAffinity),
			[]*HostState{none, one, two}, []string{"two", "one", "none"}},
		{"soft-anti-affinity spreads from members", map[string]float64{"soft_anti_affinity": 1}, soft(etcdschema.PolicySoftAntiAffinity),
			[]*HostState{two, one, none}, []string{"none", "one", "two"}},
		{"soft weighers ignore other policies", map[string]float64{"soft_affinity": 1, "soft_anti_affinity": 1},
			soft(etcdschema.PolicyAntiAffinity), []*HostState{none, one, two}, []string{"none", "one", "two"}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			got := weighOrder(t, c.weights, c.cycle, c.hosts...)
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("order = %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestAggregateMultiplierOverrides(t *testing.T) {
	// a has the most free RAM; with ram at +1 it wins.
	mk := func() (a, b *HostState) {
		return named("a", hostRes("", 4000, 1, 0, 0)), named("b", hostRes("", 1000, 1, 0, 0))
	}
	cases := []struct {
		desc    string
		aggs    []*etcdschema.Aggregate
		weights map[string]float64
		want    string
		weightA float64
	}{
		{"config multiplier", nil, map[string]float64{"ram": 1}, "a", 1},
		{"aggregate override turns a's preference around", []*etcdschema.Aggregate{agg("x", "ram_weight_multiplier", "-2")},
			map[string]float64{"ram": 1}, "b", -2},
		{"lowest override wins", []*etcdschema.Aggregate{agg("x", "ram_weight_multiplier", "3"), agg("y", "ram_weight_multiplier", "0.5")},
			map[string]float64{"ram": 1}, "a", 0.5},
		{"unreadable override falls back to config", []*etcdschema.Aggregate{agg("x", "ram_weight_multiplier", "lots")},
			map[string]float64{"ram": 1}, "a", 1},
		{"override applies to a weigher configured at 0", []*etcdschema.Aggregate{agg("x", "ram_weight_multiplier", "1")},
			map[string]float64{"ram": 0}, "a", 1},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			a, b := mk()
			a.Aggregates = c.aggs
			ws, err := NewWeighers(c.weights)
			if err != nil {
				t.Fatal(err)
			}
			out := weighHosts(ws, []*HostState{b, a}, newCycle(&RequestSpec{}))
			if out[0].host.Host != c.want {
				t.Fatalf("best = %s, want %s", out[0].host.Host, c.want)
			}
			for _, w := range out {
				if w.host == a && w.weight != c.weightA {
					t.Fatalf("a weighs %v, want %v", w.weight, c.weightA)
				}
			}
		})
	}
}
