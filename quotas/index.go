package quotas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The per-project index. A count needs the project's servers; without
// an index that means reading every instance mapping of the deployment
// (38-57 ms at 10,000 servers, on every create). Each create therefore
// writes, in the transaction that writes a server's InstanceMapping, a
// key QuotaInstance(project, uuid), and every delete of the mapping
// deletes it in its own transaction (records.DeleteInstance): at any
// revision the project's index entries are its mappings, and a count
// reads them with the project's records at one revision R as before.
// The fence argument (doc.go) is unchanged: the index only says which
// records to read.
//
// Mappings written by a Berth without the index have no entry. The
// leader builds them (BuildIndex, its quota_index duty) and then writes
// QuotaIndex{Revision: R0}, R0 the revision it read every mapping at. A
// count trusts the index only while QuotaIndex exists, and only for a
// project whose fence was not moved after R0 by an older Berth (whose
// creates leave no entry, and whose fences lack Indexed): during a
// rolling upgrade such a project is counted from every mapping, as
// before, until the leader's next sweep indexes its servers and moves
// R0 on. An entry whose mapping is gone (an older Berth's delete) is
// skipped at R, and removed by the next build.

// projectMappings are project's instance mappings at one revision, which
// it returns: from the index when it can be trusted for project, else
// from every mapping.
func (s *Store) projectMappings(ctx context.Context, project string) ([]etcdschema.InstanceMapping, int64, error) {
	k := s.keys
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(k.QuotaIndex()), clientv3.OpGet(k.QuotaFence(project)),
		clientv3.OpGet(k.QuotaInstances(project), clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("read the quota index of %q: %w", project, err)
	}
	rev := resp.Header.Revision
	trusted, err := indexTrusted(k, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, 0, err
	}
	if !trusted {
		mine, err := s.scanMappings(ctx, project, rev)
		return mine, rev, err
	}
	var ops []clientv3.Op
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		uuid, ok := etcdschema.LastSegment(string(kv.Key), k.QuotaInstances(project))
		if ok {
			ops = append(ops, clientv3.OpGet(k.InstanceMapping(uuid), clientv3.WithRev(rev)))
		}
	}
	var mine []etcdschema.InstanceMapping
	for start := 0; start < len(ops); start += maxOps {
		tr, err := s.cli.Txn(ctx).Then(ops[start:min(start+maxOps, len(ops))]...).Commit()
		if err != nil {
			return nil, 0, fmt.Errorf("read the mappings of %q's servers: %w", project, err)
		}
		for _, r := range tr.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue // an older Berth's delete left the entry
			}
			var m etcdschema.InstanceMapping
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &m); err != nil {
				return nil, 0, err
			}
			if m.ProjectID == project {
				mine = append(mine, m)
			}
		}
	}
	return mine, rev, nil
}

// indexTrusted says whether the index (QuotaIndex, absent or one key)
// may be read for the project whose fence is fence (absent or one key).
func indexTrusted(k etcdschema.Keys, index, fence kvs) (bool, error) {
	if len(index) == 0 {
		return false, nil
	}
	var ix etcdschema.QuotaIndex
	if err := etcdschema.Decode(string(index[0].Key), index[0].Value, &ix); err != nil {
		return false, err
	}
	if len(fence) == 0 || fence[0].ModRevision <= ix.Revision {
		return true, nil
	}
	var f etcdschema.QuotaFence
	if err := etcdschema.Decode(string(fence[0].Key), fence[0].Value, &f); err != nil {
		return false, err
	}
	return f.Indexed, nil
}

// scanMappings reads every instance mapping at rev and keeps project's:
// the count without an index. Only a value naming the project (its
// JSON string) is decoded.
func (s *Store) scanMappings(ctx context.Context, project string, rev int64) ([]etcdschema.InstanceMapping, error) {
	resp, err := s.cli.Get(ctx, s.keys.InstanceMappings(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, fmt.Errorf("read instance mappings: %w", err)
	}
	quoted, _ := json.Marshal(project)
	if !plainJSON(project) {
		quoted = nil // an encoder may escape it otherwise: decode every value
	}
	var mine []etcdschema.InstanceMapping
	for _, kv := range resp.Kvs {
		if project == "" || (quoted != nil && !bytes.Contains(kv.Value, quoted)) {
			continue
		}
		var m etcdschema.InstanceMapping
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			return nil, err
		}
		if m.ProjectID == project {
			mine = append(mine, m)
		}
	}
	return mine, nil
}

// groupMembers counts the servers of members (a group's member keys)
// that still have a mapping at rev.
func (s *Store) groupMembers(ctx context.Context, members []string, rev int64) (int64, error) {
	var n int64
	for start := 0; start < len(members); start += maxOps {
		part := members[start:min(start+maxOps, len(members))]
		ops := make([]clientv3.Op, len(part))
		for i, uuid := range part {
			ops[i] = clientv3.OpGet(s.keys.InstanceMapping(uuid), clientv3.WithRev(rev), clientv3.WithCountOnly())
		}
		tr, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, fmt.Errorf("read the mappings of the group's members: %w", err)
		}
		for _, r := range tr.Responses {
			n += r.GetResponseRange().Count
		}
	}
	return n, nil
}

// memberOf is the server uuid of a member key of group under the server
// groups prefix, or "".
func memberOf(k etcdschema.Keys, key, group string) string {
	id, rest, sub := strings.Cut(strings.TrimPrefix(key, k.ServerGroups()), "/")
	if !sub || id != group {
		return ""
	}
	uuid, ok := strings.CutPrefix(rest, "members/")
	if !ok || strings.Contains(uuid, "/") {
		return ""
	}
	return uuid
}
