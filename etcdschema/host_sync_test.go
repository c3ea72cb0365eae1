package etcdschema

import (
	"maps"
	"testing"
)

// A sync record as an agent before the flavors wrote it still reads, as a
// uuid-only list; one with flavors pairs them with the uuids.
func TestHostSyncFlavors(t *testing.T) {
	for _, tc := range []struct {
		desc, stored string
		wantUUIDs    int
		want         map[string]string
	}{
		{"older agent's record, uuids only",
			`{"version":1,"host":"h","uuids":["a","b"],"at":"2026-01-02T03:04:05Z"}`, 2, nil},
		{"flavors paired with the uuids, unknown left out",
			`{"version":1,"host":"h","uuids":["a","b"],"flavor_ids":["1",""],"at":"2026-01-02T03:04:05Z"}`, 2,
			map[string]string{"a": "1"}},
		{"flavors that do not pair are ignored",
			`{"version":1,"host":"h","uuids":["a","b"],"flavor_ids":["1"],"at":"2026-01-02T03:04:05Z"}`, 2, nil},
		{"empty host", `{"version":1,"host":"h","uuids":[],"at":"2026-01-02T03:04:05Z"}`, 0, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var hs HostSync
			if err := Decode("/t/hosts/h/sync", []byte(tc.stored), &hs); err != nil {
				t.Fatal(err)
			}
			if len(hs.UUIDs) != tc.wantUUIDs {
				t.Errorf("uuids %v", hs.UUIDs)
			}
			if got := hs.Flavors(); !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("Flavors() = %v, want %v", got, tc.want)
			}
		})
	}
}
