package embedetcd

import (
	"bytes"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"google.golang.org/protobuf/proto"
)

// What a harness in the member's own process (the load tool) reads of it
// directly, to measure Berth without making the member work for the
// measurement while it measures: its write history after a phase, and
// one ordered watch stream over several prefixes during it.

// Change is one key's change in the member's history.
type Change struct {
	Key      []byte // the caller's to keep
	Revision int64  // the write transaction's revision
	Deleted  bool
}

// historyWindow is how many revisions History reads in one backend read
// transaction: the values of a window are in memory at once, and a read
// transaction held open long keeps bbolt from reusing pages. (A variable:
// the test makes windows of a few revisions.)
var historyWindow int64 = 1000

// History calls fn with every change to a key under prefix in the
// revisions (from, to], in revision order: what a watch of prefix from
// revision from+1 would deliver up to to. It reads the member's backend
// directly, once, where a watch from a past revision has etcd re-read
// everything from that revision to the present for every thousand
// revisions it delivers. Revisions above to may exist (it reads what was
// committed by then). An error says part of the range was compacted
// away, before or while it read.
func (s *Server) History(prefix string, from, to int64, fn func(Change)) error {
	if from >= to {
		return nil
	}
	kv := s.etcd.Server.KV()
	compacted := func() error {
		if first := kv.FirstRev(); from+1 <= first {
			return fmt.Errorf("embedded etcd: history from revision %d: compacted up to %d", from+1, first)
		}
		return nil
	}
	if err := compacted(); err != nil {
		return err
	}
	if cur := kv.Rev(); to > cur {
		return fmt.Errorf("embedded etcd: history to revision %d: the member is at %d", to, cur)
	}
	pfx := []byte(prefix)
	b := s.etcd.Server.Backend()
	lo, hi := mvcc.NewRevBytes(), mvcc.NewRevBytes()
	for start := from + 1; start <= to; start += historyWindow {
		end := min(start+historyWindow, to+1)
		lo = mvcc.RevToBytes(mvcc.Revision{Main: start}, lo)
		hi = mvcc.RevToBytes(mvcc.Revision{Main: end}, hi)
		// Without a limit: with one, the read buffer's keys (the newest)
		// would be taken before the older ones in bbolt (UnsafeRange).
		tx := b.ConcurrentReadTx()
		tx.RLock()
		revs, vals := tx.UnsafeRange(schema.Key, lo, hi, 0)
		for i, v := range vals {
			// The values are bbolt's memory until RUnlock: Unmarshal
			// copies what fn is given.
			var rec mvccpb.KeyValue
			if err := proto.Unmarshal(v, &rec); err != nil {
				tx.RUnlock()
				return fmt.Errorf("embedded etcd: history at revision %d: %w", mvcc.BytesToRev(revs[i]).Main, err)
			}
			if !bytes.HasPrefix(rec.Key, pfx) {
				continue
			}
			fn(Change{Key: rec.Key, Revision: mvcc.BytesToRev(revs[i]).Main, Deleted: mvcc.IsTombstone(revs[i])})
		}
		tx.RUnlock()
	}
	// A compaction while it read may have removed revisions it was to
	// read: say so rather than count short.
	return compacted()
}

// WatchClient is the member's watch service as a client, in process:
// one stream whose responses arrive in the order the member sends them,
// for a reader that follows several prefixes in one order (the load
// tool's recorder). clientv3 gives each watch a channel and a goroutine
// of its own, which loses the order between them.
func (s *Server) WatchClient() pb.WatchClient {
	return adapter.WatchServerToWatchClient(v3rpc.NewWatchServer(s.etcd.Server))
}
