package placement

import (
	"context"
	"runtime"
	"sync"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// listConsumers reads every consumer at rev into st, whose providers are
// loaded already.
func (s *Service) listConsumers(ctx context.Context, st *indexState, rev int64) error {
	// st.providers is only read while consumers load.
	provider := func(uuid []byte) (string, bool) {
		if e, ok := st.providers[string(uuid)]; ok {
			return e.p.UUID, true
		}
		return "", false
	}
	return s.listConsumerPages(ctx, rev, provider, func(page []listedConsumer) error {
		for _, lc := range page {
			st.putConsumer(lc.c, lc.modRev)
		}
		return nil
	})
}

// listedConsumer is one consumer record as listed, with its mod revision.
type listedConsumer struct {
	c      *etcdschema.Consumer
	modRev int64
}

// listConsumerPages reads every consumer at rev (0: the current
// revision) and hands them to index a page at a time, in key order; an
// unreadable record is logged and left out. The records are decoded
// straight from etcd's chunks as received (informer.ListKVs: no protobuf
// message, key string or event per record), in chunks on up to
// GOMAXPROCS goroutines while the next page is fetched, each chunk's
// goroutine with a sharer of its own that keeps across pages: an
// allocation's provider uuid is provider's string for it (the indexed
// provider's), and resources maps, projects and users repeated from one
// record to the next are held once. At 100,000 hosts a million consumers
// are most of a scheduler's heap. index must not keep the page slice; an
// error of index ends the list with that error.
func (s *Service) listConsumerPages(ctx context.Context, rev int64, provider func(uuid []byte) (string, bool),
	index func(page []listedConsumer) error) error {
	sharers := make([]etcdschema.ConsumerSharer, max(1, runtime.GOMAXPROCS(0)))
	for i := range sharers {
		sharers[i].Provider = provider
	}
	type decoded struct {
		c   *etcdschema.Consumer
		err error
	}
	var out []decoded
	var page []listedConsumer
	_, err := informer.ListKVs(ctx, s.cli, s.keys.Consumers(), rev, func(kvs []informer.KV) error {
		if cap(out) < len(kvs) {
			out = make([]decoded, len(kvs))
		}
		out = out[:len(kvs)]
		decode := func(sh *etcdschema.ConsumerSharer, lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i].c, out[i].err = sh.Decode(kvs[i].Key, kvs[i].Value)
			}
		}
		if len(kvs) < minParallelDecode || len(sharers) == 1 {
			decode(&sharers[0], 0, len(kvs))
		} else {
			chunk := (len(kvs) + len(sharers) - 1) / len(sharers)
			var wg sync.WaitGroup
			for w, lo := 0, 0; lo < len(kvs); w, lo = w+1, lo+chunk {
				wg.Add(1)
				go func() {
					defer wg.Done()
					decode(&sharers[w], lo, min(lo+chunk, len(kvs)))
				}()
			}
			wg.Wait()
		}
		page = page[:0]
		for i, kv := range kvs {
			if out[i].err != nil {
				s.log.Error("skipping unreadable placement record", "key", string(kv.Key), "error", out[i].err)
			} else {
				page = append(page, listedConsumer{c: out[i].c, modRev: kv.ModRevision})
			}
			out[i] = decoded{}
		}
		err := index(page)
		clear(page)
		return err
	})
	return err
}

// minParallelDecode is the smallest page worth decoding on more than one
// goroutine (as informer.List's).
const minParallelDecode = 512
