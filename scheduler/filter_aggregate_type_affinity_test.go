package scheduler

import "testing"

func TestAggregateTypeAffinityFilter(t *testing.T) {
	checkFilter(t, AggregateTypeAffinityFilter{}, []filterCase{
		{"no aggregates passes", inAggs("h"), flavorCycle("1", "m1.tiny"), passes},
		{"aggregate without instance_type passes", inAggs("h", agg("a", "x", "y")), flavorCycle("1", "m1.tiny"), passes},
		{"named in the list passes", inAggs("h", agg("a", "instance_type", "m1.small, m1.tiny")), flavorCycle("1", "m1.tiny"), passes},
		{"not named fails", inAggs("h", agg("a", "instance_type", "m1.small,m1.large")), flavorCycle("1", "m1.tiny"), "aggregate instance_type \"m1.small,m1.large\" does not name flavor m1.tiny"},
		{"any aggregate naming it passes", inAggs("h", agg("a", "instance_type", "m1.small"), agg("b", "instance_type", "m1.tiny")),
			flavorCycle("1", "m1.tiny"), passes},
		{"no partial name match", inAggs("h", agg("a", "instance_type", "m1.tinyish")), flavorCycle("1", "m1.tiny"), "aggregate instance_type \"m1.tinyish\" does not name flavor m1.tiny"},
	})
}
