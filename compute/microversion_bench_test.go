package compute

import (
	"net/http"
	"testing"
)

// BenchmarkVersionAndRequestID is the headers' work of every answer:
// reading the microversion a request names (compute 2.74, as `berth
// bench boot` sends), then the request id and version headers answered.
func BenchmarkVersionAndRequestID(b *testing.B) {
	req := http.Header{}
	req.Set("OpenStack-API-Version", "compute 2.74")
	b.ReportAllocs()
	for b.Loop() {
		v, f := negotiate(req)
		if f != nil || v.minor != 74 {
			b.Fatalf("negotiate = %v, %v", v, f)
		}
		w := headerOnly{}
		setRequestID(w)
		setServedVersionHeaders(w.Header(), v)
	}
}

// headerOnly is a ResponseWriter that only keeps headers.
type headerOnly http.Header

func (h headerOnly) Header() http.Header       { return http.Header(h) }
func (headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (headerOnly) WriteHeader(int)             {}
