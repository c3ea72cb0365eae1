package scheduler

import (
	"reflect"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func TestAggregateRequestFilters(t *testing.T) {
	aggs := []*etcdschema.Aggregate{
		agg("az1-a", "availability_zone", "az1"),
		agg("az1-b", "availability_zone", "az1"),
		agg("az2", "availability_zone", "az2"),
		agg("tenant-p", "filter_tenant_id", "p", "filter_tenant_id_2", "q"),
		agg("tenant-q", "filter_tenant_id_9", "q"),
		agg("gpu", "trait:CUSTOM_GPU", "required"),
		agg("ssd", "trait:CUSTOM_SSD", "required", "trait:CUSTOM_FAST", "optional"),
	}
	base := Config{DefaultAvailabilityZone: "nova"}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	req := func(project, az string, kv ...string) *RequestSpec {
		s := flavorSpec("1", "f", kv...)
		s.ProjectID, s.AvailabilityZone = project, az
		return s
	}
	cases := []struct {
		desc      string
		cfg       Config
		spec      *RequestSpec
		memberOf  [][]string
		forbidden []string
		fails     bool
	}{
		{"nothing asked, nothing added", base, req("p", ""), nil, nil, false},
		{"AZ becomes member_of its aggregates", base, req("p", "az1"), [][]string{{"az1-a", "az1-b"}}, nil, false},
		{"default AZ forbids every AZ aggregate", base, req("p", "nova"), nil, []string{"az1-a", "az1-b", "az2"}, false},
		{"tenant isolation is off by default", base, req("q", ""), nil, nil, false},
		{"tenant isolation: member_of the project's aggregates",
			with(func(c *Config) { c.LimitTenantsToPlacementAggregate = true }), req("q", ""),
			[][]string{{"tenant-p", "tenant-q"}}, nil, false},
		{"tenant with no aggregate is unrestricted",
			with(func(c *Config) { c.LimitTenantsToPlacementAggregate = true }), req("z", ""), nil, nil, false},
		{"tenant with no aggregate fails when one is required",
			with(func(c *Config) {
				c.LimitTenantsToPlacementAggregate, c.PlacementAggregateRequiredForTenants = true, true
			}), req("z", ""), nil, nil, true},
		{"tenant and AZ are ANDed",
			with(func(c *Config) { c.LimitTenantsToPlacementAggregate = true }), req("p", "az2"),
			[][]string{{"tenant-p"}, {"az2"}}, nil, false},
		{"isolated aggregates are off by default", base, req("p", ""), nil, nil, false},
		{"isolation forbids aggregates whose required trait is not asked",
			with(func(c *Config) { c.EnableIsolatedAggregateFiltering = true }), req("p", "", "trait:CUSTOM_GPU", "required"),
			nil, []string{"ssd"}, false},
		{"isolation: no trait asked forbids both",
			with(func(c *Config) { c.EnableIsolatedAggregateFiltering = true }), req("p", ""),
			nil, []string{"gpu", "ssd"}, false},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			q := BuildPlacementQuery(c.spec, 1000)
			err := applyAggregateRequestFilters(&q, c.spec, aggs, c.cfg)
			if (err != nil) != c.fails {
				t.Fatalf("err = %v, want failure %v", err, c.fails)
			}
			if c.fails {
				return
			}
			g := q.Groups[0]
			if !reflect.DeepEqual(g.MemberOf, c.memberOf) {
				t.Errorf("member_of = %v, want %v", g.MemberOf, c.memberOf)
			}
			if !reflect.DeepEqual(g.ForbiddenAggregates, c.forbidden) {
				t.Errorf("forbidden aggregates = %v, want %v", g.ForbiddenAggregates, c.forbidden)
			}
			if q.Limit != 1000 {
				t.Errorf("limit = %d; aggregate filters must not change it", q.Limit)
			}
		})
	}
}

func TestLimitDroppedForAffinityHints(t *testing.T) {
	for _, h := range []etcdschema.SchedulerHints{{Group: "g"}, {SameHost: []string{"x"}}, {DifferentHost: []string{"x"}}} {
		s := flavorSpec("1", "f")
		s.Hints = h
		if q := BuildPlacementQuery(s, 1000); q.Limit != 0 {
			t.Errorf("hints %+v: limit = %d, want none", h, q.Limit)
		}
	}
	if q := BuildPlacementQuery(flavorSpec("1", "f"), 1000); q.Limit != 1000 {
		t.Errorf("no hints: limit = %d, want 1000", q.Limit)
	}
}
