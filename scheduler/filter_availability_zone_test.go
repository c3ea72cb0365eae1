package scheduler

import "testing"

func TestAvailabilityZoneFilter(t *testing.T) {
	inAZ := func(az string) *RequestSpec {
		s := flavorSpec("1", "f")
		s.AvailabilityZone = az
		return s
	}
	az1 := agg("a1", "availability_zone", "az1")
	plain := agg("p", "ssd", "true")
	checkFilter(t, AvailabilityZoneFilter{}, []filterCase{
		{"no zone asked passes", inAggs("h", az1), inAZ(""), true},
		{"host in the zone passes", inAggs("h", az1, plain), inAZ("az1"), true},
		{"host in another zone fails", inAggs("h", az1), inAZ("az2"), false},
		{"host in no zone is in the default one", inAggs("h", plain), inAZ("nova"), true},
		{"host in no zone fails a named zone", inAggs("h"), inAZ("az1"), false},
		{"host in a zone is not in the default one", inAggs("h", az1), inAZ("nova"), false},
	})
}
