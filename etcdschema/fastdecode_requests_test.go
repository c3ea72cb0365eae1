package etcdschema

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

func (g genPlacement) buildRequest() *BuildRequest {
	br := &BuildRequest{InstanceUUID: g.str(), Name: g.str(), ReservationID: g.str(), Index: int(g.int64()),
		Count: int(g.int64()), Flavor: g.flavor(), ProjectID: g.str(), UserID: g.str(), CreatedAt: g.time()}
	if g.rng.Intn(2) == 0 {
		br.AvailabilityZone, br.RequestID = g.str(), g.str()
	}
	switch g.rng.Intn(3) {
	case 0:
		br.Hints = SchedulerHints{Group: g.str()}
	case 1:
		br.Hints = SchedulerHints{SameHost: g.strs(), DifferentHost: g.strs()}
	}
	if g.rng.Intn(3) == 0 {
		br.Host, br.Node, br.Forced = g.str(), g.str(), g.rng.Intn(2) == 0
	}
	if g.rng.Intn(2) == 0 {
		br.Image = &BootImage{ID: g.str(), Name: g.str()}
		for n := g.rng.Intn(3); n > 0; n-- {
			br.Image.Command = append(br.Image.Command, g.str())
		}
	}
	if g.rng.Intn(3) == 0 {
		br.Metadata = map[string]string{}
		for n := g.rng.Intn(3); n > 0; n-- {
			br.Metadata[g.str()] = g.str()
		}
	}
	if g.rng.Intn(3) == 0 {
		d := g.str()
		br.Description = &d
	}
	return br
}

var buildRequestJSON = MustEncode(&BuildRequest{InstanceUUID: "6a0c9b1e-0000-4000-8000-000000000002", Name: "server-1",
	ReservationID: "r-1", Index: 1, Count: 2, Flavor: Flavor{header: header{Version: 1}, ID: "2", Name: "m1.small",
		VCPUs: 1, RAMMB: 2048, DiskGB: 20, ExtraSpecs: map[string]string{"hw:cpu_policy": "dedicated"}},
	ProjectID: "p", UserID: "u", AvailabilityZone: "az1", Hints: SchedulerHints{Group: "g1", SameHost: []string{"a"}},
	RequestID: "req-1", CreatedAt: providerCreated, Host: "compute-1", Node: "compute-1",
	Image:    &BootImage{ID: "1d4a4b0c-0000-4000-8000-000000000003", Name: "sleeper", Command: []string{"sleep", "600"}},
	Metadata: map[string]string{"k": "v"}, Description: new(string), Forced: true})

// TestBuildRequestFastDecodeMatchesEncodingJSON: random BuildRequests,
// reshaped, and edge cases decode exactly as encoding/json decodes them,
// or are declined; into empty destinations and into ones already
// holding values.
func TestBuildRequestFastDecodeMatchesEncodingJSON(t *testing.T) {
	g := genPlacement{rand.New(rand.NewSource(11)), new(bool)}
	var inputs [][]byte
	for i := 0; i < 2000; i++ {
		*g.plain = i%2 == 0
		if b, err := Encode(g.buildRequest()); err == nil {
			inputs = append(inputs, b, reshape(g.rng, b))
		}
	}
	inputs = append(inputs, placementEdgeCases(buildRequestJSON)...)
	for _, v := range []string{`null`, `{}`, `{"group":"x"}`, `{"group":null}`, `{"same_host":null}`, `{"same_host":[]}`,
		`{"same_host":["a","a"]}`, `{"same_host":[1]}`, `{"different_host":"a"}`, `{"group":"x","group":"y"}`,
		`{"Group":"x"}`, `{"other":1}`, `[]`, `"g"`} {
		inputs = append(inputs, []byte(strings.Replace(buildRequestJSON, `"scheduler_hints":{`, `"scheduler_hints":`+v+`,"x":{`, 1)))
		inputs = append(inputs, []byte(strings.Replace(buildRequestJSON, `"scheduler_hints":{`, `"scheduler_hints":`+v+`,"scheduler_hints":{`, 1)))
	}
	for _, v := range []string{`"description":null`, `"description":"d"`, `"description":1`, `"forced_host":false`,
		`"forced_host":null`, `"forced_host":"true"`, `"metadata":null`, `"metadata":{"a":"b","a":"c"}`, `"image":null`,
		`"index":1.5`, `"count":"2"`, `"created_at":"x"`, `"host":null`, `"name":"\u0041"`} {
		inputs = append(inputs, []byte(strings.Replace(buildRequestJSON, `"version":1`, `"version":1,`+v, 1)))
	}
	fast := 0
	for _, in := range inputs {
		if decodeBoth(t, in, BuildRequest{}) {
			fast++
		}
		d := "old"
		decodeBoth(t, in, BuildRequest{Name: "old", Count: 3, Flavor: Flavor{ID: "old", VCPUs: 9},
			Hints: SchedulerHints{Group: "old", SameHost: []string{"old"}}})
		decodeBoth(t, in, BuildRequest{Metadata: map[string]string{"old": "x"}})
		decodeBoth(t, in, BuildRequest{Description: &d})
		decodeBoth(t, in, BuildRequest{Image: &BootImage{ID: "old"}})
	}
	t.Logf("%d of %d values took the fast path", fast, len(inputs))
	if fast < 1000 {
		t.Errorf("only %d of %d values took the fast path", fast, len(inputs))
	}
	var br BuildRequest
	if !br.decodeFast([]byte(buildRequestJSON)) {
		t.Errorf("the fast path refused a BuildRequest as Berth writes it:\n%s", buildRequestJSON)
	}
	if err := Decode("/build_requests/u", []byte(`{"version":1,"count":"2"}`), &BuildRequest{}); err == nil ||
		!strings.Contains(err.Error(), "/build_requests/u") {
		t.Errorf("Decode of a malformed request = %v, want an error naming the key", err)
	}
}

// BenchmarkDecodeBuildRequest: Decode (fast path) against encoding/json.
func BenchmarkDecodeBuildRequest(b *testing.B) {
	data := []byte(buildRequestJSON)
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := Decode("k", data, &BuildRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := json.Unmarshal(data, &BuildRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
