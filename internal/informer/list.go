package informer

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Decoder is an optional interface of a Handler. Decode turns one value
// into what the handler keeps; the result is in Event.Decoded (and a
// failure in Event.DecodeErr), and Event.Value is then nil, so a list's
// raw pages are garbage as soon as they are decoded. During a list it
// runs outside the handler, on a few goroutines at once, while the next
// page is fetched: it must be safe for concurrent use and touch no
// handler state. Return nil for a key the handler reads nothing from.
type Decoder interface {
	Decode(key string, value []byte) (any, error)
}

// DecodeFunc is Decoder's method as a function, for List.
type DecodeFunc func(key string, value []byte) (any, error)

// minParallelDecode is the smallest page worth decoding on more than one
// goroutine.
const minParallelDecode = 512

// List reads every key under prefix at revision rev (0: the current
// one), page by page, and hands each page to fn in key order. It returns
// the revision read. While fn (and decode) work on one page the next is
// already being fetched, so the wait for etcd overlaps the decoding.
// With decode non-nil every value is decoded (on up to GOMAXPROCS
// goroutines) into Event.Decoded before fn sees its page, with Value
// then nil. An error of etcd's (a compacted rev included) comes back
// wrapped.
func List(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, decode DecodeFunc,
	fn func(page []Event) error) (int64, error) {
	type page struct {
		resp *clientv3.GetResponse
		err  error
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 1)
	end := clientv3.GetPrefixRangeEnd(prefix)
	// The first page is read here: it gives the revision every later
	// page is pinned to.
	first, err := cli.Get(ctx, prefix, listOpts(end, rev)...)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", prefix, err)
	}
	if rev == 0 {
		rev = first.Header.Revision
	}
	// next is where the page after resp starts ("" after the last page).
	next := func(resp *clientv3.GetResponse) string {
		if !resp.More || len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	go func(from string) {
		defer close(pages)
		for from != "" {
			resp, err := cli.Get(fctx, from, listOpts(end, rev)...)
			p := page{resp: resp, err: err}
			select {
			case pages <- p:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
			from = next(resp)
		}
	}(next(first))
	if err := fn(toEvents(first, decode)); err != nil {
		return rev, err
	}
	first = nil
	for p := range pages {
		if p.err != nil {
			return rev, fmt.Errorf("list %s at revision %d: %w", prefix, rev, p.err)
		}
		if err := fn(toEvents(p.resp, decode)); err != nil {
			return rev, err
		}
	}
	return rev, nil
}

// pageSize is PageSize; tests lower it to list in many pages.
var pageSize int64 = PageSize

func listOpts(end string, rev int64) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev)) // every page from one snapshot
	}
	return opts
}

// toEvents turns a page into events, decoding the values when decode is
// set: in chunks on up to GOMAXPROCS goroutines, each writing only its
// own events, so the page's order is kept.
func toEvents(resp *clientv3.GetResponse, decode DecodeFunc) []Event {
	evs := make([]Event, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		evs[i] = Event{Key: string(kv.Key), Value: kv.Value, Revision: kv.ModRevision}
	}
	if decode == nil {
		return evs
	}
	workers := runtime.GOMAXPROCS(0)
	if len(evs) < minParallelDecode || workers < 2 {
		decodeAll(evs, decode)
		return evs
	}
	chunk := (len(evs) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(evs); lo += chunk {
		part := evs[lo:min(lo+chunk, len(evs))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			decodeAll(part, decode)
		}()
	}
	wg.Wait()
	return evs
}

func decodeAll(evs []Event, decode DecodeFunc) {
	for i := range evs {
		evs[i].Decoded, evs[i].DecodeErr = decode(evs[i].Key, evs[i].Value)
		evs[i].Value = nil
	}
}
