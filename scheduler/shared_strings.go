package scheduler

import "github.com/berth-project/berth/etcdschema"

// Every scheduler keeps every instance's info (a million records at
// 100,000 hosts), and each record's host name and flavor were strings of
// their own, decoded from its value. The host manager holds each once:
// the host's name is its record's, and flavor names and ids come from a
// small table (a cloud has few flavors).

// maxInterned bounds the table: past it, new strings are kept as decoded.
const maxInterned = 4096

// internTable holds one copy of each string it was given (up to
// maxInterned). The host manager's lock guards it; the zero value is
// ready to use.
type internTable struct{ m map[string]string }

// intern returns the table's string equal to s, adding s when the table
// has room.
func (t *internTable) intern(s string) string {
	if s == "" {
		return s
	}
	if held, ok := t.m[s]; ok {
		return held
	}
	if t.m == nil {
		t.m = make(map[string]string)
	}
	if len(t.m) < maxInterned {
		t.m[s] = s
	}
	return s
}

// shareInfoStrings makes a freshly decoded info (not yet shared with
// anyone) hold r's name and the table's flavor strings where equal.
func (hm *HostManager) shareInfoStrings(r *hostRecord, info *etcdschema.InstanceInfo) {
	if info.Host == r.name {
		info.Host = r.name
	}
	info.Flavor = hm.names.intern(info.Flavor)
	info.FlavorID = hm.names.intern(info.FlavorID)
}
