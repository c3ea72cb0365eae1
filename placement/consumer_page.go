package placement

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// ConsumerPage reads from etcd, not from the index, up to limit consumer
// records whose uuid sorts after after ("" from the first), in key
// order, with their mod revisions; next is the uuid to read the next page
// after, "" when none follows. An unreadable record is logged and left
// out.
//
// It is for the leader's orphaned-allocation sweep, which walks every
// consumer a page per run: the sweep of a scheduler without the
// Placement API then never makes its index list and hold every consumer
// (StartOnDemand), which at 100,000 hosts × 1,000,000 instances was 3–4 s
// of a new leader's load and about 300 MB of its heap, and each run costs
// etcd one bounded range read.
func (s *Service) ConsumerPage(ctx context.Context, after string, limit int) (page []ConsumerRecord, next string, err error) {
	prefix := s.keys.Consumers()
	from := prefix
	if after != "" {
		from = s.keys.Consumer(after) + "\x00" // the first key after after's
	}
	resp, err := s.cli.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, "", fmt.Errorf("read placement consumers after %q: %w", after, err)
	}
	// Provider nil: the records keep their own provider strings (the
	// page is the caller's, not the index's).
	var sh etcdschema.ConsumerSharer
	page = make([]ConsumerRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c, err := sh.Decode(kv.Key, kv.Value)
		if err != nil {
			s.log.Error("skipping unreadable placement record", "key", string(kv.Key), "error", err)
			continue
		}
		page = append(page, ConsumerRecord{Consumer: c, ModRev: kv.ModRevision})
	}
	if resp.More && len(resp.Kvs) > 0 {
		next = strings.TrimPrefix(string(resp.Kvs[len(resp.Kvs)-1].Key), prefix)
	}
	return page, next, nil
}
