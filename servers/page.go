package servers

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// pageRead is how many instance mappings a Page reads at a time, and the
// most record gets it puts in one transaction (etcd's default
// max-txn-ops is 128).
const pageRead = 100

// Page reads servers in id order after marker ("" for the first), at
// most limit of those keep accepts (nil keeps all), from one revision.
// It walks the instance mappings, one per server wherever it is, and
// reads each mapped record (the BuildRequest of a server with no cell
// yet, else its instance), so a page costs reads in proportion to the
// mappings walked, not to every server. next is the marker of the
// following page: the last server returned when the page is full, ""
// when the walk reached the end. A mapping whose record is gone (a
// delete in progress) is skipped, as Lookup reports it not found.
func (s *Store) Page(ctx context.Context, marker string, limit int, keep func(*Server) bool) (page []*Server, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("page of servers: limit %d, want > 0", limit)
	}
	prefix := s.keys.InstanceMappings()
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	if marker != "" {
		from = s.keys.InstanceMapping(marker) + "\x00"
	}
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageRead)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("page of servers after %q: %w", marker, err)
		}
		rev = resp.Header.Revision
		if len(resp.Kvs) == 0 {
			return page, "", nil
		}
		servers, err := s.mapped(ctx, rev, resp.Kvs)
		if err != nil {
			return nil, "", err
		}
		for _, v := range servers {
			if keep != nil && !keep(v) {
				continue
			}
			page = append(page, v)
			if len(page) == limit {
				return page, v.ID(), nil
			}
		}
		if !resp.More {
			return page, "", nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// mapped reads the records the mappings name, at rev, in mapping order.
func (s *Store) mapped(ctx context.Context, rev int64, mappings []*mvccpb.KeyValue) ([]*Server, error) {
	k := s.keys
	ops := make([]clientv3.Op, 0, len(mappings))
	var building []bool // building[i]: ops[i] reads a BuildRequest
	for _, kv := range mappings {
		var m etcdschema.InstanceMapping
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			s.log.Warn("skipping unreadable instance mapping", "key", string(kv.Key), "error", err)
			continue
		}
		if m.Cell == "" {
			ops = append(ops, clientv3.OpGet(k.BuildRequest(m.InstanceUUID), clientv3.WithRev(rev)))
		} else {
			ops = append(ops, clientv3.OpGet(k.CellInstance(m.Cell, m.InstanceUUID), clientv3.WithRev(rev)))
		}
		building = append(building, m.Cell == "")
	}
	var out []*Server
	for start := 0; start < len(ops); start += pageRead {
		resp, err := s.cli.Txn(ctx).Then(ops[start:min(start+pageRead, len(ops))]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read a page of servers: %w", err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			key := string(kvs[0].Key)
			if building[start+i] {
				var br etcdschema.BuildRequest
				if err := etcdschema.Decode(key, kvs[0].Value, &br); err != nil {
					s.log.Warn("skipping unreadable build request", "key", key, "error", err)
					continue
				}
				out = append(out, &Server{BuildRequest: &br, Rev: kvs[0].ModRevision})
				continue
			}
			var in etcdschema.Instance
			if err := etcdschema.Decode(key, kvs[0].Value, &in); err != nil {
				s.log.Warn("skipping unreadable instance", "key", key, "error", err)
				continue
			}
			out = append(out, &Server{Instance: &in, Rev: kvs[0].ModRevision})
		}
	}
	return out, nil
}
