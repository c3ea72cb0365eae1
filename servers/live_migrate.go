package servers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
)

// The live migration's API side (nova/compute/api.py live_migrate): the
// server must be ACTIVE with no task, the host asked for must exist, and
// both the source's and the asked host's drivers must be able to live
// migrate (Berth checks here what Nova's conductor finds out later as a
// MigrationPreCheckError: the agent records its driver's ability on its
// service record). Then, in one transaction guarded by the instance's
// revision, task_state migrating, the Migration (accepted) and the
// MoveRequest of kind live-migration that the superconductors schedule
// (conductor/live_migrate.go). The guest keeps running throughout.

// LiveMigrateRequest is an os-migrateLive as its API checked it.
type LiveMigrateRequest struct {
	// Host is the destination asked for, "" for the scheduler's pick.
	Host string
	// BlockMigration is block_migration as asked: "auto", "true" or
	// "false" (Berth's drivers have no shared storage to tell apart;
	// it is recorded on the migration).
	BlockMigration string
	// Force skips the scheduler's filters for Host (2.30 to 2.67).
	Force     bool
	RequestID string
}

// PreCheckError is Nova's MigrationPreCheckError, refused by the API
// with 400.
type PreCheckError struct{ Reason string }

func (e *PreCheckError) Error() string { return "Migration pre-check error: " + e.Reason }

// NoValidHostError is the scheduler's NoValidHost for a destination
// asked for and not forced whose compute service is disabled: Nova's
// ComputeFilter rejects it, and below 2.34 the API answers the
// conductor's NoValidHost as a 400. Berth checks it before it accepts
// (at every microversion, as its other pre-checks).
type NoValidHostError struct{ Host string }

func (e *NoValidHostError) Error() string { return "No valid host was found. " }

// LiveToSelfError is Nova's UnableToMigrateToSelf.
type LiveToSelfError struct{ ID, Host string }

func (e *LiveToSelfError) Error() string {
	return fmt.Sprintf("Unable to migrate instance (%s) to current host (%s).", e.ID, e.Host)
}

// LiveMigrate starts a live migration of server id and returns the
// migration it created.
func (s *Store) LiveMigrate(ctx context.Context, id string, r LiveMigrateRequest) (*etcdschema.Migration, error) {
	const action = "os-migrateLive"
	v, err := s.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Instance == nil {
		return nil, &StateError{Action: action, ID: id, Attr: "vm_state", State: "building"}
	}
	in := *v.Instance
	if err := movable(action, &in, etcdschema.StatusActive); err != nil {
		return nil, err
	}
	if r.Host != "" {
		if err := s.CheckRequestedHost(ctx, r.Host, ""); err != nil {
			return nil, err
		}
		if r.Host == in.Host {
			return nil, &LiveToSelfError{ID: id, Host: in.Host}
		}
	}
	// Each host's service is read once: the source's and the
	// destination's drivers must live-migrate (in that order, as Nova's
	// checks), then a destination not forced must be enabled.
	var dest *etcdschema.Service
	for _, h := range []string{in.Host, r.Host} {
		if h == "" {
			continue
		}
		svc, err := s.readService(ctx, h)
		if err != nil {
			return nil, err
		}
		if !svc.CanLiveMigrate {
			return nil, &PreCheckError{Reason: fmt.Sprintf("The compute driver of host %s cannot live migrate.", h)}
		}
		if h == r.Host {
			dest = svc
		}
	}
	if dest != nil && !r.Force && dest.Disabled {
		// As the scheduler's ComputeFilter would.
		return nil, &NoValidHostError{Host: r.Host}
	}
	now := time.Now().UTC()
	node := in.Node
	if node == "" {
		node = in.Host
	}
	block := r.BlockMigration
	if block == "" {
		block = "auto"
	}
	mig := &etcdschema.Migration{UUID: uuid.NewString(), InstanceUUID: id, Cell: in.Cell,
		ProjectID: in.ProjectID, UserID: in.UserID, MigrationType: etcdschema.MigrationTypeLiveMigration,
		Status: etcdschema.MigrationAccepted, SourceHost: in.Host, SourceNode: node,
		OldFlavor: in.Flavor, NewFlavor: in.Flavor, RequestedHost: r.Host, ForceHost: r.Force && r.Host != "",
		BlockMigration: block, RequestID: r.RequestID, CreatedAt: now, UpdatedAt: now}
	req := &etcdschema.MoveRequest{InstanceUUID: id, Cell: in.Cell, MigrationUUID: mig.UUID,
		RequestID: r.RequestID, CreatedAt: now, Kind: etcdschema.MigrationTypeLiveMigration}
	in.TaskState, in.MigrationUUID, in.UpdatedAt = etcdschema.TaskMigrating, mig.UUID, now
	k := s.keys
	ikey := k.CellInstance(in.Cell, id)
	// The destination's claim will hold the flavor beside the source's
	// (the migration's): the project's quota usage record covers it.
	held := quotas.MoveRequest{Project: in.ProjectID, User: in.UserID, RequestID: r.RequestID,
		HeldCores: int64(in.Flavor.VCPUs), HeldRAMMB: int64(in.Flavor.RAMMB)}
	stored, err := s.commitHeld(ctx, held, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ikey), "=", v.Rev),
		clientv3.Compare(clientv3.CreateRevision(k.MoveRequest(id)), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
			clientv3.OpPut(k.Migration(in.Cell, mig.UUID), etcdschema.MustEncode(mig)),
			clientv3.OpPut(k.MoveRequest(id), etcdschema.MustEncode(req)),
			clientv3.OpPut(k.MigrationMapping(mig.UUID), etcdschema.MustEncode(&etcdschema.InstanceMapping{
				InstanceUUID: id, Cell: in.Cell, ProjectID: in.ProjectID, CreatedAt: now}))})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", action, id, err)
	}
	if !stored {
		return nil, fmt.Errorf("%s %s: %w", action, id, ErrKeptChanging)
	}
	s.log.Info("live migration accepted", "instance", id, "migration", mig.UUID, "source", in.Host,
		"host", r.Host, "force", mig.ForceHost, "request_id", r.RequestID)
	return mig, nil
}

// readService reads host's service record (HostError when it has none).
func (s *Store) readService(ctx context.Context, host string) (*etcdschema.Service, error) {
	key := s.keys.Service(host)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read service of %s: %w", host, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, &HostError{Host: host}
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &svc); err != nil {
		return nil, err
	}
	return &svc, nil
}
