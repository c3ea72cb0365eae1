package etcdschema

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// tableSharer is a StringSharer holding one copy of each string.
type tableSharer map[string]string

func (t tableSharer) Share(b []byte) string {
	if s, ok := t[string(b)]; ok {
		return s
	}
	s := string(b)
	t[s] = s
	return s
}

// sharingMatchesDecode: DecodeInstanceInfoSharing gives Decode's value
// and success for data, for a host that matches the record's, one that
// does not, and none; with a sharer and without.
func sharingMatchesDecode(t *testing.T, data []byte) {
	t.Helper()
	var want InstanceInfo
	wantErr := Decode("k", data, &want)
	for _, host := range []string{"", "compute-000001", want.Host} {
		for _, names := range []StringSharer{nil, tableSharer{}} {
			got, err := DecodeInstanceInfoSharing("k", data, host, names)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%q host %q: error %v, Decode's %v", data, host, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(*got, want) {
				t.Fatalf("%q host %q:\nsharing %+v\nDecode  %+v", data, host, *got, want)
			}
		}
	}
}

// TestDecodeInstanceInfoSharingMatchesDecode runs sharingMatchesDecode
// on the records agents write and on JSON the fast path leaves to
// encoding/json (FuzzFastDecode runs it on any bytes).
func TestDecodeInstanceInfoSharingMatchesDecode(t *testing.T) {
	for _, s := range []string{
		MustEncode(&InstanceInfo{UUID: "u1", Host: "compute-000001", FlavorID: "2", Flavor: "m1.small", State: "active",
			UpdatedAt: time.Unix(1700000000, 5).UTC()}),
		MustEncode(&InstanceInfo{UUID: "u2", Host: "other", FlavorID: "é", Flavor: "a\"b", State: "x"}),
		`{"version":1,"host":"compute-000001","Flavor":"m1","flavor_id":"1"}`,
		`{"version":1,"host":"compute-000001","flavor":"m1","flavor":"m2","flavor_id":null}`,
		`{"version":1,"host":"a\u0062","other":[1]}`, `{"version":2}`, `{"version":1,"flavor":5}`, `null`, ``,
	} {
		sharingMatchesDecode(t, []byte(s))
	}
}

// TestDecodeInstanceInfoSharingShares: the common record takes the
// caller's host and the sharer's flavor strings, so a scheduler keeping a
// million of them holds each once.
func TestDecodeInstanceInfoSharingShares(t *testing.T) {
	names := tableSharer{"m1.small": "m1.small", "2": "2"}
	host := "compute-000001"
	data := []byte(MustEncode(&InstanceInfo{UUID: "u1", Host: host, FlavorID: "2", Flavor: "m1.small", State: "active"}))
	got, err := DecodeInstanceInfoSharing("k", data, host, names)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool { return len(a) > 0 && len(a) == len(b) && unsafeData(a) == unsafeData(b) }
	if !same(got.Host, host) || !same(got.Flavor, names["m1.small"]) || !same(got.FlavorID, names["2"]) {
		t.Fatalf("strings not shared: %+v", got)
	}
}

func BenchmarkDecodeInstanceInfoSharing(b *testing.B) {
	host := "compute-000001"
	data := []byte(MustEncode(&InstanceInfo{UUID: "2f9c0d1e-0000-4000-8000-000000000001", Host: host,
		FlavorID: "2", Flavor: "m1.small", State: "active", UpdatedAt: time.Now().UTC()}))
	names := tableSharer{}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeInstanceInfoSharing("k", data, host, names); err != nil {
			b.Fatal(err)
		}
	}
}

// syncSharingMatchesDecode: DecodeHostSyncSharing gives Decode's value
// and success for data, with sharers and without, and so does
// DecodeHostSyncReusing into a HostSync that held another sync, its
// arrays shorter or longer than data's.
func syncSharingMatchesDecode(t *testing.T, data []byte) {
	t.Helper()
	var want HostSync
	wantErr := Decode("k", data, &want)
	for _, share := range []bool{false, true} {
		var uuid func([]byte) string
		var flavors StringSharer
		if share {
			uuid, flavors = tableSharer{}.Share, tableSharer{}
		}
		got, err := DecodeHostSyncSharing("k", data, uuid, flavors)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q sharing %v: error %v, Decode's %v", data, share, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(*got, want) {
			t.Fatalf("%q sharing %v:\nsharing %+v\nDecode  %+v", data, share, *got, want)
		}
		for _, held := range []int{0, 1, 40} {
			reused := HostSync{Host: "old", UUIDs: make([]string, held, held+1), FlavorIDs: make([]string, held)}
			for i := range held {
				reused.UUIDs[i], reused.FlavorIDs[i] = "old-uuid", "old-flavor"
			}
			err := DecodeHostSyncReusing("k", data, &reused, uuid, flavors)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%q reusing %d, sharing %v: error %v, Decode's %v", data, held, share, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(reused, want) {
				t.Fatalf("%q reusing %d, sharing %v:\nreusing %+v\nDecode  %+v", data, held, share, reused, want)
			}
		}
	}
}

// TestDecodeHostSyncSharingShares: a sync's uuids are the caller's
// strings and its flavor ids the sharer's, on the fast path and on
// encoding/json's (an escape in the host name sends it there).
func TestDecodeHostSyncSharingShares(t *testing.T) {
	for _, host := range []string{"compute-000001", "compute-\u0030"} {
		held := tableSharer{"u1": "u1", "u2": "u2"}
		flavors := tableSharer{"2": "2"}
		data := []byte(`{"version":1,"host":"` + host + `","uuids":["u1","u2"],"flavor_ids":["2","2"],"at":"2026-01-02T03:04:05Z"}`)
		hs, err := DecodeHostSyncSharing("k", data, held.Share, flavors)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs.UUIDs) != 2 || len(hs.FlavorIDs) != 2 {
			t.Fatalf("%s: decoded %+v", host, hs)
		}
		for i, u := range hs.UUIDs {
			if unsafeData(u) != unsafeData(held[u]) || unsafeData(hs.FlavorIDs[i]) != unsafeData(flavors["2"]) {
				t.Errorf("%s: uuid %s or its flavor is a copy, not the caller's string", host, u)
			}
		}
	}
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
