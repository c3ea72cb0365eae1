package compute

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkWriteAnswer is writeBody of two answers as handlers build
// them: a create's (the bench's: default security group, a generated
// password) and a server list's basic views of 20 servers.
func BenchmarkWriteAnswer(b *testing.B) {
	base := "http://127.0.0.1:8774/v2.1"
	id := "3f2b1c9e-5a4d-4e8f-9b7a-0c1d2e3f4a5b"
	create := obj{{"server", obj{{"id", id}, {"links", serverLinks(base, id)}, {"OS-DCF:diskConfig", "MANUAL"},
		{"security_groups", []obj{{{"name", "default"}}}}, {"adminPass", "Qw3rTy8uIo9P"}}}}
	var list []obj
	for range 20 {
		list = append(list, obj{{"id", id}, {"name", "bench-server-1"}, {"links", serverLinks(base, id)}})
	}
	v := version{minor: 74}
	for _, bc := range []struct {
		name string
		out  any
	}{
		{"create", create},
		{"list-20", obj{{"servers", list}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				w.Body.Reset()
				clear(w.Header())
				writeBody(w, &v, 202, bc.out)
			}
		})
	}
}
