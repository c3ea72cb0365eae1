package servers

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Server is one server where it was found: still a BuildRequest (no cell
// yet), or an Instance in its cell. Exactly one of BuildRequest and
// Instance is set.
type Server struct {
	BuildRequest *etcdschema.BuildRequest
	Instance     *etcdschema.Instance
	// Mapping is the server's InstanceMapping (nil in a List, which reads
	// the records themselves).
	Mapping *etcdschema.InstanceMapping
	// Rev is the ModRevision a delete guards on: the mapping's for a
	// BuildRequest, the instance's otherwise.
	Rev int64
}

// ID is the server's uuid.
func (v *Server) ID() string {
	if v.Instance != nil {
		return v.Instance.UUID
	}
	return v.BuildRequest.InstanceUUID
}

// ProjectID is the project that owns the server.
func (v *Server) ProjectID() string {
	if v.Instance != nil {
		return v.Instance.ProjectID
	}
	return v.BuildRequest.ProjectID
}

// Lookup finds a server wherever it is: still a BuildRequest, or an
// instance in the cell its mapping names. ErrNotFound when it is not.
func (s *Store) Lookup(ctx context.Context, id string) (*Server, error) {
	k := s.keys
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(k.InstanceMapping(id)), clientv3.OpGet(k.BuildRequest(id))).Commit()
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", id, err)
	}
	mkv := resp.Responses[0].GetResponseRange().Kvs
	bkv := resp.Responses[1].GetResponseRange().Kvs
	if len(mkv) == 0 {
		return nil, ErrNotFound
	}
	var m etcdschema.InstanceMapping
	if err := etcdschema.Decode(k.InstanceMapping(id), mkv[0].Value, &m); err != nil {
		return nil, err
	}
	if m.Cell == "" {
		if len(bkv) == 0 {
			// Between the BuildRequest's deletion and the mapping's update:
			// both happen in one transaction, so this is a deletion race.
			return nil, ErrNotFound
		}
		var br etcdschema.BuildRequest
		if err := etcdschema.Decode(k.BuildRequest(id), bkv[0].Value, &br); err != nil {
			return nil, err
		}
		return &Server{BuildRequest: &br, Mapping: &m, Rev: mkv[0].ModRevision}, nil
	}
	ikey := k.CellInstance(m.Cell, id)
	ir, err := s.cli.Get(ctx, ikey)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ikey, err)
	}
	if len(ir.Kvs) == 0 {
		return nil, ErrNotFound
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(ikey, ir.Kvs[0].Value, &in); err != nil {
		return nil, err
	}
	return &Server{Instance: &in, Mapping: &m, Rev: ir.Kvs[0].ModRevision}, nil
}

// List reads every server from one consistent snapshot of the build
// requests and the cells, in no particular order. Unreadable records are
// logged and skipped.
func (s *Store) List(ctx context.Context) ([]*Server, error) {
	k := s.keys
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(k.BuildRequests(), clientv3.WithPrefix()),
		clientv3.OpGet(k.CellsPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	var out []*Server
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var br etcdschema.BuildRequest
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &br); err != nil {
			s.log.Warn("skipping unreadable build request", "key", string(kv.Key), "error", err)
			continue
		}
		out = append(out, &Server{BuildRequest: &br, Rev: kv.ModRevision})
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		key := string(kv.Key)
		if !strings.Contains(strings.TrimPrefix(key, k.CellsPrefix()), "/instances/") {
			continue
		}
		var in etcdschema.Instance
		if err := etcdschema.Decode(key, kv.Value, &in); err != nil {
			s.log.Warn("skipping unreadable instance", "key", key, "error", err)
			continue
		}
		out = append(out, &Server{Instance: &in, Rev: kv.ModRevision})
	}
	return out, nil
}
