package etcdschema

import (
	"errors"
	"testing"
)

// TestFlavorRecordsAcrossVersions: the attributes Nova's flavor API added
// (description, rxtx_factor, is_public, the access list) are read from a
// record written before them as Nova's defaults, and a record of a newer
// version is still refused.
func TestFlavorRecordsAcrossVersions(t *testing.T) {
	cases := []struct {
		desc, value string
		want        Flavor
		refused     bool
	}{
		{desc: "written before the flavor API",
			value: `{"version":1,"id":"2","name":"m1.small","vcpus":1,"ram":2048,"disk":20,"ephemeral":0,"swap":0}`,
			want:  Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}},
		{desc: "private with access and a description",
			value: `{"version":1,"id":"x","name":"p","vcpus":1,"ram":1,"disk":0,"ephemeral":0,"swap":0,"description":"d","rxtx_factor":2.5,"private":true,"projects":["a"]}`,
			want: Flavor{header: header{Version: 1}, ID: "x", Name: "p", VCPUs: 1, RAMMB: 1, Description: ptr("d"), RXTXFactor: 2.5,
				Private: true, Projects: []string{"a"}}},
		{desc: "a newer version", value: `{"version":2,"id":"2","name":"m1.small"}`, refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			var f Flavor
			err := Decode("/berth/flavors/x", []byte(tc.value), &f)
			if tc.refused {
				if !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("Decode = %v, want ErrUnsupportedVersion", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Name != tc.want.Name || f.ID != tc.want.ID || (f.Description == nil) != (tc.want.Description == nil) ||
				f.RXTX() != tc.want.RXTX() || f.IsPublic() != tc.want.IsPublic() || len(f.Projects) != len(tc.want.Projects) {
				t.Errorf("decoded %+v, want %+v", f, tc.want)
			}
		})
	}
	old := Flavor{ID: "2", Name: "m1.small", VCPUs: 1}
	b := MustEncode(&old)
	if string(b) != `{"version":1,"id":"2","name":"m1.small","vcpus":1,"ram":0,"disk":0,"ephemeral":0,"swap":0}` {
		t.Errorf("a flavor with none of the new attributes encodes as %s: an older build must read it byte for byte as before", b)
	}
	e := Flavor{ID: "p", Description: ptr("d"), RXTXFactor: 2, Private: true, Projects: []string{"a"}}.Embedded()
	if e.Description != nil || e.RXTXFactor != 0 || e.Private || e.Projects != nil || e.ID != "p" {
		t.Errorf("Embedded kept the flavor API's attributes: %+v", e)
	}
}

func ptr(s string) *string { return &s }
