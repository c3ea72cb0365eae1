package quotas

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Building the per-project index (index.go) where it is missing or
// behind: the leader's quota_index duty calls IndexStale every sweep,
// and BuildIndex when it says so. Both are idempotent; each write is
// guarded by the mapping it indexes and by the caller's fence, so a
// former leader, or a mapping deleted meanwhile, writes nothing wrong.

// indexPage is how many keys one read of the build takes, and
// indexBatch how many entries one write transaction puts or deletes
// (each with its compare, within etcd's 128).
const (
	indexPage  = 1000
	indexBatch = 100
)

// IndexStale says whether the index needs building: no QuotaIndex yet
// (a deployment from before the index), a project fence moved after it
// by an older Berth (fence without Indexed), or not as many entries as
// instance mappings (a writer that does not index, or an older Berth's
// delete). Its reads are counts and the fences, not the servers.
func IndexStale(ctx context.Context, cli *clientv3.Client, k etcdschema.Keys) (bool, string, error) {
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(k.QuotaIndex()),
		clientv3.OpGet(k.InstanceMappings(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(k.QuotaInstancesAll(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(k.QuotaFences(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return false, "", fmt.Errorf("read the quota index's state: %w", err)
	}
	index := resp.Responses[0].GetResponseRange().Kvs
	if len(index) == 0 {
		return true, "no index yet", nil
	}
	mappings, entries := resp.Responses[1].GetResponseRange().Count, resp.Responses[2].GetResponseRange().Count
	if mappings != entries {
		return true, fmt.Sprintf("%d instance mappings, %d index entries", mappings, entries), nil
	}
	for _, f := range resp.Responses[3].GetResponseRange().Kvs {
		ok, err := indexTrusted(k, index, kvs{f})
		if err != nil {
			return false, "", err
		}
		if !ok {
			return true, "a create by a Berth without the index: " + string(f.Key), nil
		}
	}
	return false, "", nil
}

// IndexBuild is what one BuildIndex did.
type IndexBuild struct {
	Revision       int64 // every mapping at Revision is indexed
	Added, Removed int
}

// BuildIndex indexes every instance mapping that has no entry, removes
// the entries whose mapping is gone, and then writes QuotaIndex with the
// revision it read the mappings at, all under fence (the leader's: a
// former leader writes nothing). by names the writer in QuotaIndex.
func BuildIndex(ctx context.Context, cli *clientv3.Client, k etcdschema.Keys, fence clientv3.Cmp, by string) (IndexBuild, error) {
	var b IndexBuild
	type mapped struct {
		project   string
		createRev int64
	}
	mappings := map[string]mapped{}
	rev, err := readPaged(ctx, cli, k.InstanceMappings(), 0, false, func(key string, value []byte, createRev int64) error {
		var m etcdschema.InstanceMapping
		if err := etcdschema.Decode(key, value, &m); err != nil {
			return err
		}
		mappings[m.InstanceUUID] = mapped{m.ProjectID, createRev}
		return nil
	})
	if err != nil {
		return b, err
	}
	b.Revision = rev
	indexed := map[string]bool{}
	var stale []string // entry keys whose mapping is gone, or names another project
	var staleUUID []string
	if _, err := readPaged(ctx, cli, k.QuotaInstancesAll(), rev, true, func(key string, _ []byte, _ int64) error {
		p, err := k.ParseKey(key)
		if err != nil || p.Kind != etcdschema.KindQuotaInstance {
			return nil // not an entry: leave it
		}
		if m, ok := mappings[p.UUID]; ok && m.project == p.ID {
			indexed[p.UUID] = true
			return nil
		}
		stale = append(stale, key)
		staleUUID = append(staleUUID, p.UUID)
		return nil
	}); err != nil {
		return b, err
	}
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	flush := func(done *int) error {
		if len(ops) == 0 {
			return nil
		}
		n, err := guardedWrites(ctx, cli, fence, cmps, ops)
		cmps, ops = cmps[:0], ops[:0]
		*done += n
		return err
	}
	now := time.Now().UTC()
	for uuid, m := range mappings {
		if indexed[uuid] {
			continue
		}
		// Put only while the mapping is the one read (not deleted since).
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.InstanceMapping(uuid)), "=", m.createRev))
		ops = append(ops, clientv3.OpPut(k.QuotaInstance(m.project, uuid), etcdschema.MustEncode(&etcdschema.QuotaInstance{CreatedAt: now})))
		if len(ops) == indexBatch {
			if err := flush(&b.Added); err != nil {
				return b, err
			}
		}
	}
	if err := flush(&b.Added); err != nil {
		return b, err
	}
	for i, key := range stale {
		// Delete only while the mapping it names is (still) not there, or
		// is the one read, of another project.
		cr := int64(0)
		if m, ok := mappings[staleUUID[i]]; ok {
			cr = m.createRev
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.InstanceMapping(staleUUID[i])), "=", cr))
		ops = append(ops, clientv3.OpDelete(key))
		if len(ops) == indexBatch {
			if err := flush(&b.Removed); err != nil {
				return b, err
			}
		}
	}
	if err := flush(&b.Removed); err != nil {
		return b, err
	}
	ix := &etcdschema.QuotaIndex{Revision: rev, BuiltAt: now, BuiltBy: by}
	resp, err := cli.Txn(ctx).If(fence).Then(clientv3.OpPut(k.QuotaIndex(), etcdschema.MustEncode(ix))).Commit()
	if err != nil {
		return b, fmt.Errorf("write the quota index's revision: %w", err)
	}
	if !resp.Succeeded {
		return b, ErrFenceLost
	}
	return b, nil
}

// ErrFenceLost is a build whose caller's fence failed: another leader.
var ErrFenceLost = errors.New("quota index: the fence no longer holds")

// guardedWrites commits ops under fence and cmps; where cmps fail (a
// mapping changed since it was read) it commits each op alone under its
// own compare, skipping those whose mapping changed. It returns how many
// ops were applied.
func guardedWrites(ctx context.Context, cli *clientv3.Client, fence clientv3.Cmp, cmps []clientv3.Cmp, ops []clientv3.Op) (int, error) {
	resp, err := cli.Txn(ctx).If(fence).Then(clientv3.OpTxn(cmps, ops, nil)).Commit()
	if err != nil {
		return 0, fmt.Errorf("write quota index entries: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrFenceLost
	}
	if resp.Responses[0].GetResponseTxn().Succeeded {
		return len(ops), nil
	}
	n := 0
	for i := range ops {
		resp, err := cli.Txn(ctx).If(fence).Then(clientv3.OpTxn(cmps[i:i+1], ops[i:i+1], nil)).Commit()
		if err != nil {
			return n, fmt.Errorf("write a quota index entry: %w", err)
		}
		if !resp.Succeeded {
			return n, ErrFenceLost
		}
		if resp.Responses[0].GetResponseTxn().Succeeded {
			n++
		}
	}
	return n, nil
}

// readPaged reads every key under prefix at rev (0: now, then the
// revision of the first page for the rest), in pages, calling fn with
// each; it returns the revision read at.
func readPaged(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, keysOnly bool,
	fn func(key string, value []byte, createRev int64) error) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(indexPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("read %s for the quota index: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			if err := fn(string(kv.Key), kv.Value, kv.CreateRevision); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
