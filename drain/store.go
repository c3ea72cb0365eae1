package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
)

// DefaultParallel is how many servers a drain moves at once unless asked.
const DefaultParallel = 4

// MaxParallel bounds a drain's parallelism: each move is a scheduling
// request and two hosts' work, and a drain should not crowd out builds.
const MaxParallel = 64

// DisabledReason is the disabled_reason a drain gives its host.
const DisabledReason = "draining"

// Errors of the drain API, each answered with its own status.
var (
	// ErrNoDrain: the host has no drain record.
	ErrNoDrain = errors.New("the host has no drain")
	// ErrAlreadyDraining: a drain of the host is still draining.
	ErrAlreadyDraining = errors.New("the host is already draining")
	// ErrNotDraining: cancel of a drain that already ended.
	ErrNotDraining = errors.New("the drain has already ended")
	// ErrKeptChanging: the record changed under every attempt.
	ErrKeptChanging = errors.New("the drain record kept changing")
)

// Request is an operator's drain of one host.
type Request struct {
	Live bool
	// Deadline is how long the drain may take (0: no deadline).
	Deadline time.Duration
	// Parallel is how many moves at once (0: DefaultParallel).
	Parallel  int
	RequestID string
}

// Validate checks r's bounds (the API's 400s).
func (r *Request) Validate() error {
	if r.Parallel < 0 || r.Parallel > MaxParallel {
		return fmt.Errorf("'parallel' must be between 1 and %d, not %d", MaxParallel, r.Parallel)
	}
	if r.Deadline < 0 {
		return fmt.Errorf("'deadline' must not be negative, not %s", r.Deadline)
	}
	return nil
}

// Started is a drain just recorded.
type Started struct {
	Drain *etcdschema.HostDrain
	// Unconfirmed is set when the host is disabled but its up agent did
	// not confirm COMPUTE_STATUS_DISABLED in time (hosts.Updated).
	Unconfirmed error
}

// Store starts, reads and cancels drains: what the API and the console
// call. The moving is the leader's (Duty).
type Store struct {
	cli   *clientv3.Client
	keys  etcdschema.Keys
	hosts *hosts.Store
	live  LiveMigrator
	log   hclog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// NewStore returns the drain operations over hs's hosts.
func NewStore(cli *clientv3.Client, keys etcdschema.Keys, hs *hosts.Store, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{cli: cli, keys: keys, hosts: hs, log: log, Now: time.Now}
}

// SetLiveMigrator says live drains can be done (the leader's duty needs
// its own, DutyConfig.Live); without one Start refuses them.
func (s *Store) SetLiveMigrator(l LiveMigrator) { s.live = l }

// CanLive says whether Start accepts live drains.
func (s *Store) CanLive() bool { return s.live != nil }

// Start disables host (reason "draining", waiting up to traitWait for
// its agent as PUT /v1/services does) and records the drain with the
// host's servers waiting. A host whose previous drain ended may be
// drained again; one still draining is ErrAlreadyDraining.
func (s *Store) Start(ctx context.Context, host string, r Request, traitWait time.Duration) (*Started, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Live && s.live == nil {
		return nil, ErrLiveUnavailable
	}
	if r.Parallel == 0 {
		r.Parallel = DefaultParallel
	}
	if r.RequestID == "" {
		r.RequestID = "req-" + uuid.NewString()
	}
	if host == "" || strings.Contains(host, "/") {
		return nil, fmt.Errorf("%w: %q", hosts.ErrNotFound, host)
	}
	key := s.keys.HostDrain(host)
	prev, _, err := s.read(ctx, host)
	if err != nil && !errors.Is(err, ErrNoDrain) {
		return nil, err
	}
	if prev != nil && !etcdschema.DrainFinal(prev.State) {
		return nil, ErrAlreadyDraining
	}
	// Disabled first: from here on no scheduling request picks the host,
	// so the list of its servers can only shrink (or gain the builds
	// already cast to it, which the duty adds as it finds them).
	disabled, reason := true, DisabledReason
	up, err := s.hosts.Update(ctx, host, hosts.Change{Disabled: &disabled, DisabledReason: &reason}, traitWait)
	if err != nil {
		return nil, err
	}
	for try := 0; try < 10; try++ {
		prev, rev, err := s.read(ctx, host)
		if err != nil && !errors.Is(err, ErrNoDrain) {
			return nil, err
		}
		if prev != nil && !etcdschema.DrainFinal(prev.State) {
			return nil, ErrAlreadyDraining
		}
		uuids, err := s.hostServers(ctx, host)
		if err != nil {
			return nil, err
		}
		now := s.Now().UTC()
		d := &etcdschema.HostDrain{Host: host, Live: r.Live, Parallel: r.Parallel, State: etcdschema.DrainDraining,
			RequestID: r.RequestID, RequestedAt: now, UpdatedAt: now, Instances: []etcdschema.DrainedServer{}}
		if r.Deadline > 0 {
			at := now.Add(r.Deadline)
			d.Deadline = &at
		}
		for _, id := range uuids {
			d.Instances = append(d.Instances, etcdschema.DrainedServer{UUID: id, State: etcdschema.DrainWaiting})
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(d))).Commit()
		if err != nil {
			return nil, fmt.Errorf("record the drain of %s: %w", host, err)
		}
		if resp.Succeeded {
			s.log.Info("host drain started", "host", host, "servers", len(d.Instances), "live", r.Live,
				"parallel", r.Parallel, "deadline", r.Deadline, "request_id", r.RequestID)
			return &Started{Drain: d, Unconfirmed: up.Unconfirmed}, nil
		}
	}
	return nil, fmt.Errorf("drain %s: %w", host, ErrKeptChanging)
}

// hostServers lists the uuids of the servers host reports, sorted.
func (s *Store) hostServers(ctx context.Context, host string) ([]string, error) {
	return hostServers(ctx, s.cli, s.keys, host)
}

func hostServers(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, host string) ([]string, error) {
	resp, err := cli.Get(ctx, keys.HostInstances(host), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list the servers of %s: %w", host, err)
	}
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		p, err := keys.ParseKey(string(kv.Key))
		if err != nil || p.Kind != etcdschema.KindHostInstance {
			continue
		}
		out = append(out, p.UUID)
	}
	slices.Sort(out)
	return out, nil
}

// Get reads host's drain (ErrNoDrain when it has none).
func (s *Store) Get(ctx context.Context, host string) (*etcdschema.HostDrain, error) {
	d, _, err := s.read(ctx, host)
	return d, err
}

// List reads every drain, by host.
func (s *Store) List(ctx context.Context) ([]*etcdschema.HostDrain, error) {
	resp, err := s.cli.Get(ctx, s.keys.HostDrains(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list drains: %w", err)
	}
	out := make([]*etcdschema.HostDrain, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var d etcdschema.HostDrain
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &d); err != nil {
			s.log.Warn("skipping an unreadable drain", "key", string(kv.Key), "error", err)
			continue
		}
		out = append(out, &d)
	}
	return out, nil
}

// Cancel stops host's drain from starting moves: the moves in flight
// finish (the leader still follows and confirms them) and the host stays
// disabled.
func (s *Store) Cancel(ctx context.Context, host string) (*etcdschema.HostDrain, error) {
	key := s.keys.HostDrain(host)
	for try := 0; try < 10; try++ {
		d, rev, err := s.read(ctx, host)
		if err != nil {
			return nil, err
		}
		if etcdschema.DrainFinal(d.State) {
			return d, ErrNotDraining
		}
		now := s.Now().UTC()
		d.State, d.UpdatedAt, d.FinishedAt = etcdschema.DrainCancelled, now, &now
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(d))).Commit()
		if err != nil {
			return nil, fmt.Errorf("cancel the drain of %s: %w", host, err)
		}
		if resp.Succeeded {
			s.log.Info("host drain cancelled", "host", host, "counts", d.Counts())
			return d, nil
		}
	}
	return nil, fmt.Errorf("cancel the drain of %s: %w", host, ErrKeptChanging)
}

func (s *Store) read(ctx context.Context, host string) (*etcdschema.HostDrain, int64, error) {
	key := s.keys.HostDrain(host)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read the drain of %s: %w", host, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrNoDrain
	}
	var d etcdschema.HostDrain
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &d); err != nil {
		return nil, 0, err
	}
	return &d, resp.Kvs[0].ModRevision, nil
}
