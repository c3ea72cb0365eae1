package leader

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/metrics"
)

// serverCountPage is how many cell records one read of the count takes.
const serverCountPage = 1000

// ServerCountDuty counts servers by Nova status and cell every interval
// for berth_servers: each cell's instance records (cell0's are the
// buried), read in pages at one revision, and the build requests (BUILD,
// cell "none") by a count-only read. No process keeps every instance in
// memory, so a scrape cannot count them; one sweep per leader interval
// costs a read of the cells' records (about 1 KB a server) on the leader
// alone, and Metrics.Leading(false) withdraws the figures when the term
// ends. The counts are also kept in etcd (Keys.ServerCounts, fenced,
// written when they changed since the term's last write), so that the
// web console's overview shows them without reading every server.
func ServerCountDuty(cli *clientv3.Client, keys etcdschema.Keys, interval time.Duration, m *metrics.Metrics) Duty {
	var written map[metrics.ServerKey]int
	var term Fence
	return Duty{Name: "server_counts", Interval: interval, Run: func(ctx context.Context, f Fence) error {
		counts, rev, err := countServersAt(ctx, cli, keys)
		if err != nil {
			return err
		}
		m.SetServerCounts(counts)
		if f == term && maps.Equal(counts, written) {
			return nil
		}
		if err := RecordServerCounts(ctx, cli, keys, f, counts, rev); err != nil {
			return err
		}
		written, term = counts, f
		return nil
	}}
}

// RecordServerCounts writes counts, made at revision rev, to
// Keys.ServerCounts under fence f.
func RecordServerCounts(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, f Fence, counts map[metrics.ServerKey]int, rev int64) error {
	rec := &etcdschema.ServerCounts{Revision: rev, CountedAt: time.Now().UTC(), Counts: []etcdschema.ServerCount{}}
	for k, n := range counts {
		rec.Counts = append(rec.Counts, etcdschema.ServerCount{Status: k.Status, Cell: k.Cell, Count: n})
	}
	sort.Slice(rec.Counts, func(a, b int) bool {
		ca, cb := rec.Counts[a], rec.Counts[b]
		if ca.Cell != cb.Cell {
			return ca.Cell < cb.Cell
		}
		return ca.Status < cb.Status
	})
	if _, err := f.Txn(ctx, cli, nil, clientv3.OpPut(keys.ServerCounts(), etcdschema.MustEncode(rec))); err != nil {
		return fmt.Errorf("record server counts: %w", err)
	}
	return nil
}

// CountServers counts servers by Nova status and cell, at one revision.
func CountServers(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys) (map[metrics.ServerKey]int, error) {
	counts, _, err := countServersAt(ctx, cli, keys)
	return counts, err
}

// countServersAt is CountServers with the revision it counted at.
func countServersAt(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys) (map[metrics.ServerKey]int, int64, error) {
	prefix := keys.CellsPrefix()
	end := clientv3.GetPrefixRangeEnd(prefix)
	counts := map[metrics.ServerKey]int{}
	from, rev := prefix, int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(serverCountPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("count servers: read cells: %w", err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			cell := etcdschema.FirstSegment(key, prefix)
			if _, ok := etcdschema.LastSegment(key, keys.CellInstances(cell)); !ok {
				continue
			}
			var inst etcdschema.Instance
			if err := etcdschema.Decode(key, kv.Value, &inst); err != nil {
				continue // unreadable: the API shows it as it can; not a count
			}
			counts[metrics.ServerKey{Status: inst.Status, Cell: cell}]++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	resp, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(rev))
	if err != nil {
		return nil, 0, fmt.Errorf("count servers: build requests: %w", err)
	}
	if resp.Count > 0 {
		counts[metrics.ServerKey{Status: etcdschema.StatusBuild, Cell: metrics.CellNone}] = int(resp.Count)
	}
	return counts, rev, nil
}
