package bench

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// unfinishedReport says where each server a run waited for in vain
// stopped: the stages the recorder saw, and every key under the prefix
// that names it, with its value (cut). A smoke run that timed out with a
// server lost said only "199 of 200 servers finished", which left
// nothing to find the cause with.
func (r *runner) unfinishedReport(ctx context.Context) string {
	r.idsMu.Lock()
	ids := append([]string(nil), r.ids...)
	r.idsMu.Unlock()
	const maxServers, maxValue = 5, 600
	var lost []string
	var b strings.Builder
	r.rec.mu.Lock()
	for _, id := range ids {
		t := r.rec.traces[id]
		if t != nil && t.finished() {
			continue
		}
		lost = append(lost, id)
		if len(lost) > maxServers {
			continue
		}
		if t == nil {
			fmt.Fprintf(&b, "\n  server %s: never seen by the recorder", id)
			continue
		}
		fmt.Fprintf(&b, "\n  server %s: build request seen %v, leased %v, claimed %v, cast %v (%d casts), mapping deleted %v",
			id, !t.buildRequest.IsZero(), !t.lease.IsZero(), !t.claim.IsZero(), !t.cast.IsZero(), t.casts, t.deleted)
	}
	r.rec.mu.Unlock()
	if len(lost) == 0 {
		return ""
	}
	if len(lost) > maxServers {
		fmt.Fprintf(&b, "\n  (%d more)", len(lost)-maxServers)
		lost = lost[:maxServers]
	}
	resp, err := r.t.Client.Get(ctx, r.t.Keys.All(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		fmt.Fprintf(&b, "\n  (listing the keys: %v)", err)
		return b.String()
	}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		for _, id := range lost {
			if !strings.Contains(key, id) {
				continue
			}
			v, err := r.t.Client.Get(ctx, key)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "\n  %s: (read: %v)", key, err)
			case len(v.Kvs) == 0:
				fmt.Fprintf(&b, "\n  %s: (gone)", key)
			default:
				val := string(v.Kvs[0].Value)
				if len(val) > maxValue {
					val = val[:maxValue] + "..."
				}
				fmt.Fprintf(&b, "\n  %s (mod rev %d, lease %x): %s", key, v.Kvs[0].ModRevision, v.Kvs[0].Lease, val)
			}
		}
	}
	return b.String()
}
