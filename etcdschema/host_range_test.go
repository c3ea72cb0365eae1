package etcdschema

import "testing"

// TestHostInstancesToServiceHoldsOnlyThem: the range an agent follows
// holds its host's instance info and service record and no other key of
// that host or of a host whose name extends it.
func TestHostInstancesToServiceHoldsOnlyThem(t *testing.T) {
	k := New("/berth")
	from, end := k.HostInstancesToService("h")
	for _, c := range []struct {
		key  string
		want bool
	}{
		{k.HostInstance("h", "u1"), true},
		{k.Service("h"), true},
		{k.Alive("h"), false},
		{k.Build("h", "u1"), false},
		{k.HostCapacity("h"), false},
		{k.HostDown("h"), false},
		{k.HostSync("h"), false},
		{k.Service("h1"), false},
		{k.HostInstance("h1", "u1"), false},
		{k.Service("g"), false},
	} {
		if got := from <= c.key && c.key < end; got != c.want {
			t.Errorf("%q in [%q, %q) = %v, want %v", c.key, from, end, got, c.want)
		}
	}
}
