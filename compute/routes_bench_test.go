package compute

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// BenchmarkRouteMatch is the router's work for a request: POST /servers
// (a create, what `berth bench boot` sends) and a server's action under
// a project id (a variable, and the project-id form).
func BenchmarkRouteMatch(b *testing.B) {
	a := New(nil, etcdschema.New("/bench-match"), nil)
	for _, bc := range []struct{ name, method, path string }{
		{"create", "POST", "/servers"},
		{"action-under-project", "POST", "/6f70656e737461636b20726f636b73/servers/2a4e3f1c-0b1d-4c5e-8f9a-1b2c3d4e5f60/action"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rt, _ := a.match(bc.method, bc.path); rt == nil {
					b.Fatal("no route")
				}
			}
		})
	}
}
