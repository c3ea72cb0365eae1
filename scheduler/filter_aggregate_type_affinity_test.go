package scheduler

import "testing"

func TestAggregateTypeAffinityFilter(t *testing.T) {
	checkFilter(t, AggregateTypeAffinityFilter{}, []filterCase{
		{"no aggregates passes", inAggs("h"), flavorSpec("1", "m1.tiny"), true},
		{"aggregate without instance_type passes", inAggs("h", agg("a", "x", "y")), flavorSpec("1", "m1.tiny"), true},
		{"named in the list passes", inAggs("h", agg("a", "instance_type", "m1.small, m1.tiny")), flavorSpec("1", "m1.tiny"), true},
		{"not named fails", inAggs("h", agg("a", "instance_type", "m1.small,m1.large")), flavorSpec("1", "m1.tiny"), false},
		{"any aggregate naming it passes", inAggs("h", agg("a", "instance_type", "m1.small"), agg("b", "instance_type", "m1.tiny")),
			flavorSpec("1", "m1.tiny"), true},
		{"no partial name match", inAggs("h", agg("a", "instance_type", "m1.tinyish")), flavorSpec("1", "m1.tiny"), false},
	})
}
