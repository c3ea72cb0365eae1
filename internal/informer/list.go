package informer

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Decoder is an optional interface of a Handler. Decode turns one value
// into what the handler keeps; the result is in Event.Decoded (and a
// failure in Event.DecodeErr), and a Reset's Event.Value is then nil,
// so a list's raw pages are garbage as soon as they are decoded. During a list it
// runs outside the handler, on a few goroutines at once, while the next
// page is fetched: it must be safe for concurrent use and touch no
// handler state. Return nil for a key the handler reads nothing from (or
// reads itself from Event.Value: a watch's and a paged list's events
// carry it). The key and the value may alias a list's buffer (a
// PagedResetter's list): Decode keeps neither, only copies.
type Decoder interface {
	Decode(key string, value []byte) (any, error)
}

// DecodeFunc is Decoder's method as a function, for List.
type DecodeFunc func(key string, value []byte) (any, error)

// minParallelDecode is the smallest page worth decoding on more than one
// goroutine.
const minParallelDecode = 512

// List reads every key under prefix at revision rev (0: the current
// one), chunk by chunk, and hands each chunk to fn in key order. It
// returns the revision read. While fn (and decode) work on one chunk the
// next is already being fetched, so the wait for etcd overlaps the
// decoding. With decode non-nil every value is decoded (on up to
// GOMAXPROCS goroutines) into Event.Decoded before fn sees its chunk,
// with Value then nil; decode gets the value as etcd sent it (ListKVs)
// and must not keep it. An error of etcd's (a compacted rev included)
// comes back wrapped.
//
// It streams the range (etcd 3.7's RangeStream), which etcd answers
// without counting the keys left to the range's end; a paged Get counts
// them for every page, a cost that grows with the square of the prefix
// (at 100,000 hosts it was 40% of the CPU of a scheduler's cold start).
// A client or server without RangeStream (the embedded member's
// in-process client, an older etcd) gets the paged Get.
func List(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, decode DecodeFunc,
	fn func(page []Event) error) (int64, error) {
	return listEvents(ctx, cli, prefix, rev, decode, false, fn)
}

// listEvents is List; with borrow one slice of events serves every
// chunk (cleared after fn), for an fn that keeps none of them, and each
// event's Key and Value alias the chunk as etcd sent it (valid only until
// fn returns; Value set whether decoded or not).
func listEvents(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, decode DecodeFunc,
	borrow bool, fn func(page []Event) error) (int64, error) {
	var evs []Event
	return ListKVs(ctx, cli, prefix, rev, func(kvs []KV) error {
		if !borrow || cap(evs) < len(kvs) {
			evs = make([]Event, len(kvs))
		}
		evs = evs[:len(kvs)]
		toEvents(evs, kvs, decode, borrow)
		err := fn(evs)
		if borrow {
			clear(evs)
		}
		return err
	})
}

// ListRaw is List for a reader that keeps more of a key than an Event
// carries (the debug dump: create revision and lease): fn gets each
// chunk's key-values as etcd sent them, in key order, and must not
// modify them. Like List it reads at one revision (rev, or 0: the
// current one), streamed, the next chunk fetched while fn works.
func ListRaw(ctx context.Context, cli *clientv3.Client, prefix string, rev int64,
	fn func(kvs []*mvccpb.KeyValue) error) (int64, error) {
	if rev == 0 {
		// A read of the prefix's own key (not a range) costs nothing and
		// gives the revision the whole list is pinned to.
		resp, err := cli.Get(ctx, prefix)
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
	}
	streamed, err := listStream(ctx, cli, prefix, rev, fn)
	if streamed || !isUnimplemented(err) {
		return rev, err
	}
	return rev, listPaged(ctx, cli, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, fn)
}

// listRange is List for the keys [from, end) (an informer's Until), in
// plain pages: the ranges followed that way are a few keys.
func listRange(ctx context.Context, cli *clientv3.Client, from, end string, rev int64, decode DecodeFunc,
	fn func(page []Event) error) error {
	return listPaged(ctx, cli, from, end, rev, func(page []*mvccpb.KeyValue) error {
		kvs := make([]KV, len(page))
		for i, kv := range page {
			kvs[i] = KV{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision,
				ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		}
		evs := make([]Event, len(kvs))
		toEvents(evs, kvs, decode, false)
		return fn(evs)
	})
}

// isUnimplemented says whether err is a server's (or the in-process
// adapter's) answer that it has no RangeStream.
func isUnimplemented(err error) bool {
	return err != nil && status.Code(err) == codes.Unimplemented
}

// listStream reads the prefix with one RangeStream at rev. streamed is
// true once a chunk was handed to fn: an error after that is not
// answered by listing again here (the caller retries the whole list).
func listStream(ctx context.Context, cli *clientv3.Client, prefix string, rev int64,
	fn func(kvs []*mvccpb.KeyValue) error) (streamed bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream (and its reader) on an early return
	// Unlike Get, GetStream hands back gRPC's errors as they are:
	// rpctypes.Error makes etcd's own (a compacted revision) the errors
	// callers test for with errors.Is.
	ch, err := cli.GetStream(sctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithRev(rev))
	if err != nil {
		return false, fmt.Errorf("list %s at revision %d: %w", prefix, rev, rpctypes.Error(err))
	}
	for r := range ch {
		if err := r.Err(); err != nil {
			return streamed, fmt.Errorf("list %s at revision %d: %w", prefix, rev, rpctypes.Error(err))
		}
		if r.RangeResponse == nil {
			continue
		}
		streamed = true
		if err := fn(r.RangeResponse.Kvs); err != nil {
			return true, err
		}
	}
	if err := ctx.Err(); err != nil {
		return streamed, fmt.Errorf("list %s: %w", prefix, err)
	}
	if !streamed {
		// An empty prefix still answers one (empty) chunk; none at all
		// is a stream that ended early.
		return false, fmt.Errorf("list %s at revision %d: the stream ended without a response", prefix, rev)
	}
	return true, nil
}

// listPaged reads [prefix, end) at rev in pages of pageSize, the next
// page fetched while fn works on the current one.
func listPaged(ctx context.Context, cli *clientv3.Client, prefix, end string, rev int64,
	fn func(kvs []*mvccpb.KeyValue) error) error {
	type page struct {
		resp *clientv3.GetResponse
		err  error
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 1)
	go func() {
		defer close(pages)
		from := prefix
		for from != "" {
			resp, err := cli.Get(fctx, from, listOpts(end, rev)...)
			select {
			case pages <- page{resp: resp, err: err}:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
			from = ""
			if resp.More && len(resp.Kvs) > 0 {
				from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
		}
	}()
	for p := range pages {
		if p.err != nil {
			return fmt.Errorf("list %s at revision %d: %w", prefix, rev, p.err)
		}
		if err := fn(p.resp.Kvs); err != nil {
			return err
		}
	}
	return nil
}

// pageSize is PageSize; tests lower it to list in many pages (when the
// list falls back to paged reads).
var pageSize int64 = PageSize

func listOpts(end string, rev int64) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev)) // every page from one snapshot
	}
	return opts
}

// toEvents turns a chunk into events, each with a key of its own, and
// the value copied or, when decode is set, decoded: in parts on up to
// GOMAXPROCS goroutines, each writing only its own events, so the
// chunk's order is kept. With borrow the key and the value are the
// chunk's bytes, not copies (listEvents).
func toEvents(evs []Event, kvs []KV, decode DecodeFunc, borrow bool) {
	for i, kv := range kvs {
		evs[i] = Event{Revision: kv.ModRevision, CreateRevision: kv.CreateRevision}
		switch {
		case borrow:
			evs[i].Key, evs[i].Value = borrowString(kv.Key), kv.Value
		case decode == nil:
			evs[i].Key, evs[i].Value = string(kv.Key), bytes.Clone(kv.Value)
		default:
			evs[i].Key = string(kv.Key)
		}
	}
	if decode == nil {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if len(evs) < minParallelDecode || workers < 2 {
		decodeAll(evs, kvs, decode)
		return
	}
	part := (len(evs) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(evs); lo += part {
		hi := min(lo+part, len(evs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			decodeAll(evs[lo:hi], kvs[lo:hi], decode)
		}()
	}
	wg.Wait()
}

// borrowString is b's bytes as a string, without a copy: for a key that
// lives only as long as the chunk it is in (a borrowed event's).
func borrowString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func decodeAll(evs []Event, kvs []KV, decode DecodeFunc) {
	for i := range evs {
		evs[i].Decoded, evs[i].DecodeErr = decode(evs[i].Key, kvs[i].Value)
	}
}
