package servers

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdretry"
	"github.com/berth-project/berth/quotas"
)

// Allocations is what server operations need of placement: freeing the
// claim of an instance that never reached a host.
type Allocations interface {
	DeleteAllocations(ctx context.Context, consumer string) error
}

// Store runs the server operations over the records under keys.
type Store struct {
	cli       *clientv3.Client
	keys      etcdschema.Keys
	placement Allocations
	// defaultAZ is the zone of hosts in no AZ aggregate (Nova's
	// default_availability_zone); see DefaultZone.
	defaultAZ string
	// quotas, when set, check every create against its project's
	// quotas in the transaction that stores it (SetQuotas).
	quotas *quotas.Store
	// creates stores the creates ready together in one request
	// (create_batch.go).
	creates createBatcher
	log     hclog.Logger
}

// New returns the server operations; placement frees the claims of
// hostless servers a delete removes (nil: no placement, as in tests that
// never delete one).
func New(cli *clientv3.Client, keys etcdschema.Keys, placement Allocations, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{cli: cli, keys: keys, placement: placement, log: log}
}

// SetPlacement sets the placement a delete frees claims through.
func (s *Store) SetPlacement(p Allocations) { s.placement = p }

// SetQuotas makes every create check its project's quotas (nil: none).
func (s *Store) SetQuotas(q *quotas.Store) { s.quotas = q }

// SetDefaultAvailabilityZone sets the zone of hosts in no AZ aggregate
// (default "nova"); requests may name it or an aggregate's zone.
func (s *Store) SetDefaultAvailabilityZone(az string) { s.defaultAZ = az }

// DefaultZone is the default availability zone, Nova's "nova" unless set.
func (s *Store) DefaultZone() string {
	if s.defaultAZ == "" {
		return "nova"
	}
	return s.defaultAZ
}

// ErrNotFound is a server (or a flavor, a host) that does not exist.
var ErrNotFound = errors.New("not found")

// StorePatience is how long an operation keeps asking etcd to commit
// while it cannot (a leader election after a member died, a proposal
// timed out on a loaded disk): about two of etcd's 7 s proposal
// timeouts. Past it the caller answers 503 and the client may ask again.
const StorePatience = 15 * time.Second

// RetryStore runs op, again while etcd cannot commit, for StorePatience
// (etcdretry.Do), logging each retry as "<what>: etcd cannot commit for
// now, retrying" with kv and the attempt. op must be safe to repeat after
// an attempt whose answer etcd lost.
func (s *Store) RetryStore(ctx context.Context, what string, op func(context.Context) error, kv ...any) error {
	return etcdretry.Do(ctx, StorePatience, op, func(attempt int, err error) {
		s.log.Warn(what+": etcd cannot commit for now, retrying", append(slices.Clip(kv), "attempt", attempt, "error", err)...)
	})
}
