package hosts

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/conductor"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/scheduler"
)

// Control is one of Berth's control services as Nova would list it: a
// running scheduler is a nova-scheduler, a running superconductor a
// nova-conductor, each on the host named by its member id, in the
// internal zone. They are read from their /members/ registrations, which
// live under the process's session lease: a listed control service is up,
// and one that stopped is not listed at all (Nova would show it down).
type Control struct {
	Binary, Host string
	CreateRev    int64
	Started      time.Time
}

// UUID is the control service's uuid (2.53 on).
func (c *Control) UUID() string { return serviceUUID(c.Binary, c.Host, c.CreateRev) }

// controlRoles maps a member role to the Nova binary it stands for.
var controlRoles = []struct{ role, binary string }{
	{scheduler.Role, "nova-scheduler"},
	{conductor.SuperconductorRole, "nova-conductor"},
}

// Controls reads the registered control services.
func (s *Store) Controls(ctx context.Context) ([]Control, error) {
	var out []Control
	for _, r := range controlRoles {
		resp, err := s.cli.Get(ctx, s.keys.Members(r.role), clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("read %s members: %w", r.role, err)
		}
		for _, kv := range resp.Kvs {
			var m etcdschema.Member
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
				s.log.Warn("skipping unreadable member", "role", r.role, "error", err)
				continue
			}
			out = append(out, Control{Binary: r.binary, Host: m.ID, CreateRev: kv.CreateRevision, Started: m.Started})
		}
	}
	return out, nil
}
