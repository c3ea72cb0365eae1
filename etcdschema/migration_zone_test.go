package etcdschema

import "testing"

// A move's zone bookkeeping: the server takes the destination's zone
// when it lands there and gets its own back on a revert, even when it
// had none; a migration written before the zone was recorded (no
// DestAZ) leaves the zone alone both ways.
func TestMigrationLandsWithItsZone(t *testing.T) {
	for _, tc := range []struct {
		desc                     string
		zone, destAZ             string
		wantOnDest, wantOnSource string
	}{
		{"another zone", "az1", "az2", "az2", "az1"},
		{"a server with no zone recorded", "", "az2", "az2", ""},
		{"an older migration without the zone", "az1", "", "az1", "az1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m := &Migration{SourceHost: "h1", SourceNode: "n1"}
			m.SetDestination(Selection{ServiceHost: "h2", AvailabilityZone: tc.destAZ})
			in := &Instance{Host: "h1", Node: "n1", AvailabilityZone: tc.zone}
			m.LandOnDest(in)
			if in.Host != "h2" || in.Node != "h2" || in.AvailabilityZone != tc.wantOnDest {
				t.Errorf("on the destination: %s/%s in %q, want h2/h2 in %q", in.Host, in.Node, in.AvailabilityZone, tc.wantOnDest)
			}
			m.LandOnSource(in)
			if in.Host != "h1" || in.Node != "n1" || in.AvailabilityZone != tc.wantOnSource {
				t.Errorf("reverted: %s/%s in %q, want h1/n1 in %q", in.Host, in.Node, in.AvailabilityZone, tc.wantOnSource)
			}
		})
	}
}
