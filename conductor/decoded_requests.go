package conductor

import (
	"sync"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/workqueue"
)

// decodedRequests holds BuildRequests decoded once per stored version
// (key and mod revision): the queue's Defer hook (leadsElsewhere) reads
// every dequeued request's reservation under the queue's lock, and
// process then decoded the same bytes again; the JSON decoding of each
// request twice was a tenth of the superconductor's CPU in a boot. A
// version is immutable, so an entry is right for as long as its mod
// revision matches; process takes its request's entry out. Entries of
// requests another holder took are never taken: past maxDecodedRequests
// the map starts over, which only costs a decode again.
type decodedRequests struct {
	mu sync.Mutex
	m  map[string]decodedRequest
}

type decodedRequest struct {
	modRev int64
	br     *etcdschema.BuildRequest
	err    error
}

// maxDecodedRequests bounds the entries kept: far more than the requests
// a superconductor has queued at once.
const maxDecodedRequests = 16384

// get is it's BuildRequest, decoded on first use of its version. The
// request is shared: read-only.
func (d *decodedRequests) get(it workqueue.Item) (*etcdschema.BuildRequest, error) {
	d.mu.Lock()
	e, ok := d.m[it.Key]
	d.mu.Unlock()
	if ok && e.modRev == it.ModRev {
		return e.br, e.err
	}
	e = decodedRequest{modRev: it.ModRev, br: &etcdschema.BuildRequest{}}
	e.err = etcdschema.Decode(it.Key, it.Value, e.br)
	d.mu.Lock()
	if d.m == nil || len(d.m) >= maxDecodedRequests {
		d.m = make(map[string]decodedRequest)
	}
	d.m[it.Key] = e
	d.mu.Unlock()
	return e.br, e.err
}

// take is get for the request's holder, which works it: the entry goes,
// and the copy returned is the caller's own.
func (d *decodedRequests) take(it workqueue.Item) (etcdschema.BuildRequest, error) {
	br, err := d.get(it)
	d.mu.Lock()
	delete(d.m, it.Key)
	d.mu.Unlock()
	return *br, err
}
