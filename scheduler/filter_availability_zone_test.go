package scheduler

import "testing"

func TestAvailabilityZoneFilter(t *testing.T) {
	inAZ := func(az string) *Cycle {
		s := flavorSpec("1", "f")
		s.AvailabilityZone = az
		return newCycle(s)
	}
	az1 := agg("a1", "availability_zone", "az1")
	plain := agg("p", "ssd", "true")
	checkFilter(t, AvailabilityZoneFilter{}, []filterCase{
		{"no zone asked passes", inAggs("h", az1), inAZ(""), passes},
		{"host in the zone passes", inAggs("h", az1, plain), inAZ("az1"), passes},
		{"host in another zone fails", inAggs("h", az1), inAZ("az2"), "in availability zone az1, not az2"},
		{"host in no zone is in the default one", inAggs("h", plain), inAZ("nova"), passes},
		{"host in no zone fails a named zone", inAggs("h"), inAZ("az1"), "in no availability zone aggregate (default zone nova), not in az1"},
		{"host in a zone is not in the default one", inAggs("h", az1), inAZ("nova"), "in availability zone az1, not nova"},
	})
}
