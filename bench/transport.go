package bench

import (
	"net/http"
	"time"
)

// newTransport keeps one idle connection per client, so W clients reuse
// W connections instead of opening one per POST. It does not ask for
// gzip (DisableCompression): Berth's APIs answer uncompressed anyway, and
// the Accept-Encoding net/http adds otherwise is a header map built for
// every request.
func newTransport(clients int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.MaxIdleConns = clients * 2
	t.MaxIdleConnsPerHost = clients * 2
	t.IdleConnTimeout = 90 * time.Second
	return t
}
