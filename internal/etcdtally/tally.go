// Package etcdtally counts a process's etcd requests by kind and by the
// role that made them: ranges, puts, deletes and transactions (with the
// ranges, puts, deletes and compares the etcd server ran inside each),
// and the watch events delivered. The load tool turns it on
// (`berth bench -etcd-tally`) to say what each role asks of etcd per
// server booted, the figure the engineers removing reads and writes work
// from.
//
// It counts on the client side, wrapping a clientv3.Client's KV and
// Watcher, because most of Berth's roles reach the embedded member through
// the in-process client (v3client), which bypasses etcd's gRPC
// interceptors and so its request metrics. The role is the pprof label of
// the request's context (package rolelabel), which every role's context
// carries; a request whose context has none is counted under the client's
// own name.
package etcdtally

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Kinds of what a Tally counts, as its rows name them.
const (
	Range        = "range"          // a Get (or GetStream) request
	RangeKeys    = "range keys"     // keys those ranges returned
	Put          = "put"            // a Put request
	Delete       = "delete"         // a Delete request
	Txn          = "txn"            // a Txn request (committed or not)
	TxnRange     = "txn range"      // a range the server ran inside a txn
	TxnPut       = "txn put"        // a put the server ran inside a txn
	TxnDelete    = "txn delete"     // a delete the server ran inside a txn
	TxnCompare   = "txn compare"    // a compare the server evaluated (nested txns' too)
	TxnFailed    = "txn failed"     // a txn whose compares failed (its Else ran)
	WatchOpen    = "watch"          // a watch opened
	WatchResp    = "watch response" // a watch response delivered (events, progress)
	WatchEvents  = "watch events"   // events those responses carried
	OtherRequest = "other"          // Compact and the like
)

// Tally is the counters, safe for concurrent use.
type Tally struct {
	mu     sync.RWMutex
	counts map[key]*atomic.Int64
}

type key struct{ role, kind string }

// New is an empty tally.
func New() *Tally { return &Tally{counts: map[key]*atomic.Int64{}} }

// Add counts n of kind for role: requests a client made outside the
// wrapped clientv3.Client (a raw watch stream of the member's: the load
// tool's recorder).
func (t *Tally) Add(role, kind string, n int64) { t.add(role, kind, n) }

// add adds n to role's kind: a read lock and an atomic add once the
// counter exists, which it does after the first request of its kind.
func (t *Tally) add(role, kind string, n int64) {
	if n == 0 {
		return
	}
	k := key{role, kind}
	t.mu.RLock()
	c := t.counts[k]
	t.mu.RUnlock()
	if c == nil {
		t.mu.Lock()
		if c = t.counts[k]; c == nil {
			c = new(atomic.Int64)
			t.counts[k] = c
		}
		t.mu.Unlock()
	}
	c.Add(n)
}

// Row is one role's count of one kind.
type Row struct {
	Role  string `json:"role"`
	Kind  string `json:"kind"`
	Count int64  `json:"count"`
}

// Rows are the counts, by role then kind.
func (t *Tally) Rows() []Row {
	t.mu.RLock()
	rows := make([]Row, 0, len(t.counts))
	for k, c := range t.counts {
		rows = append(rows, Row{Role: k.role, Kind: k.kind, Count: c.Load()})
	}
	t.mu.RUnlock()
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Role != rows[j].Role {
			return rows[i].Role < rows[j].Role
		}
		return kindOrder[rows[i].Kind] < kindOrder[rows[j].Kind]
	})
	return rows
}

// Reset zeroes every counter: what follows is the measured phase. The
// counters stay, so a request in flight across it counts in one phase.
func (t *Tally) Reset() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, c := range t.counts {
		c.Store(0)
	}
}

// kindOrder is the order a role's rows are listed in: requests, then what
// ran inside transactions, then watches.
var kindOrder = func() map[string]int {
	m := map[string]int{}
	for i, k := range []string{Range, RangeKeys, Put, Delete, Txn, TxnFailed, TxnCompare, TxnRange,
		TxnPut, TxnDelete, WatchOpen, WatchResp, WatchEvents, OtherRequest} {
		m[k] = i
	}
	return m
}()
