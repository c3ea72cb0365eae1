package conductor

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestRequestSpecForcedOrRequested: a forced host or node becomes
// force_hosts / force_nodes (no filters), a requested one
// requested_destination (filtered), as Nova's RequestSpec has them.
func TestRequestSpecForcedOrRequested(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		br         etcdschema.BuildRequest
		wantForced string // fmt of ForceHosts, ForceNodes
		wantDest   string // fmt of RequestedDestination
	}{
		{"no host", etcdschema.BuildRequest{}, "[] []", "<nil>"},
		{"requested host", etcdschema.BuildRequest{Host: "h1"}, "[] []", "&{h1  }"},
		{"requested node", etcdschema.BuildRequest{Node: "h1"}, "[] []", "&{ h1 }"},
		{"forced host", etcdschema.BuildRequest{Host: "h1", Forced: true}, "[h1] []", "<nil>"},
		{"forced node", etcdschema.BuildRequest{Node: "h1", Forced: true}, "[] [h1]", "<nil>"},
		{"forced host and node", etcdschema.BuildRequest{Host: "h1", Node: "h1", Forced: true}, "[h1] [h1]", "<nil>"},
	} {
		spec := requestSpec(&tc.br)
		if got := fmt.Sprint(spec.ForceHosts, " ", spec.ForceNodes); got != tc.wantForced {
			t.Errorf("%s: forced %s, want %s", tc.desc, got, tc.wantForced)
		}
		if got := fmt.Sprint(spec.RequestedDestination); got != tc.wantDest {
			t.Errorf("%s: requested destination %s, want %s", tc.desc, got, tc.wantDest)
		}
	}
}
