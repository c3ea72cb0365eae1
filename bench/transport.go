package bench

import (
	"net/http"
	"time"
)

// newTransport keeps one idle connection per client, so W clients reuse
// W connections instead of opening one per POST.
func newTransport(clients int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = clients * 2
	t.MaxIdleConnsPerHost = clients * 2
	t.IdleConnTimeout = 90 * time.Second
	return t
}
