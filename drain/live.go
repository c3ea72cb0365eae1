package drain

import (
	"context"
	"errors"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// LiveMigrator starts a live migration of server id to a host the
// scheduler picks, tagged with requestID, and returns its migration: the
// drain's view of servers.Store.LiveMigrate. A build without one refuses
// live drains (ErrLiveUnavailable).
type LiveMigrator interface {
	LiveMigrate(ctx context.Context, id, requestID string) (*etcdschema.Migration, error)
}

// ServersLive is the live migration of package servers (os-migrateLive
// with block_migration auto and the scheduler's pick), as the stack
// wires it for the API, the console and the leader's duty.
func ServersLive(srv *servers.Store) LiveMigrator {
	return LiveMigratorFunc(func(ctx context.Context, id, requestID string) (*etcdschema.Migration, error) {
		return srv.LiveMigrate(ctx, id, servers.LiveMigrateRequest{BlockMigration: "auto", RequestID: requestID})
	})
}

// LiveMigratorFunc adapts a function to LiveMigrator.
type LiveMigratorFunc func(ctx context.Context, id, requestID string) (*etcdschema.Migration, error)

// LiveMigrate calls f.
func (f LiveMigratorFunc) LiveMigrate(ctx context.Context, id, requestID string) (*etcdschema.Migration, error) {
	return f(ctx, id, requestID)
}

// ErrLiveUnavailable is a live drain asked of a build with no live
// migration wired in.
var ErrLiveUnavailable = errors.New("live migration is not available in this build")
