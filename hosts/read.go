package hosts

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdretry"
)

// DefaultTraitSyncTimeout is how long a disable or enable waits for an up
// agent to confirm COMPUTE_STATUS_DISABLED on its provider; Nova's
// set_host_enabled is a synchronous RPC with a similar bound.
const DefaultTraitSyncTimeout = 10 * time.Second

// DefaultZone is Nova's default_availability_zone.
const DefaultZone = "nova"

// storePatience is how long a change rides out an etcd that cannot commit.
const storePatience = 15 * time.Second

// Store reads and changes hosts in etcd.
type Store struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	log  hclog.Logger
	// DefaultZone is the zone of a host in no AZ aggregate; "" is "nova".
	DefaultZone string
}

// New returns a Store over the records under keys.
func New(cli *clientv3.Client, keys etcdschema.Keys, log hclog.Logger) *Store {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Store{cli: cli, keys: keys, log: log}
}

// Zone is the default availability zone.
func (s *Store) Zone() string {
	if s.DefaultZone == "" {
		return DefaultZone
	}
	return s.DefaultZone
}

// Host is what one read of the hosts prefix says of one host.
type Host struct {
	Service etcdschema.Service
	// ModRev and CreateRev are the service record's etcd revisions.
	ModRev, CreateRev int64
	Alive             bool
	// Instances are the uuids of the instance info keys, sorted; Builds
	// counts the builds cast to the host and not yet done.
	Instances []string
	Builds    int
	// readRev is the revision Get read the host at.
	readRev int64
}

// Up is Nova's service_is_up: forced_down wins over any heartbeat.
func (h *Host) Up() bool { return h.Alive && !h.Service.ForcedDown }

// ID is the host's service as Nova's integer id (before 2.53): the create
// revision of its record, unique among records and stable while it lives.
func (h *Host) ID() int64 { return h.CreateRev }

// UUID is the host's service uuid (2.53 on).
func (h *Host) UUID() string { return serviceUUID("nova-compute", h.Service.Host, h.CreateRev) }

// serviceNamespace derives service uuids; any fixed uuid would do.
var serviceNamespace = uuid.MustParse("9d0c7f4e-2b51-4c57-9a43-6f3e8d1b2a60")

func serviceUUID(binary, host string, createRev int64) string {
	return uuid.NewSHA1(serviceNamespace, []byte(binary+"/"+host+"/"+strconv.FormatInt(createRev, 10))).String()
}

// Read returns every host with a service record, read in one range, and
// the revision it was read at. It reads the instance info and build keys
// too (to name and count them); the range is bounded by hosts x instances
// per host, acceptable for an operator call.
func (s *Store) Read(ctx context.Context) (map[string]*Host, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.HostsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read hosts: %w", err)
	}
	out := map[string]*Host{}
	rec := func(h string) *Host {
		if out[h] == nil {
			out[h] = &Host{}
		}
		return out[h]
	}
	for _, kv := range resp.Kvs {
		host, rest, err := s.keys.ParseHostKey(string(kv.Key))
		if err != nil {
			continue
		}
		switch {
		case rest == "service":
			r := rec(host)
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &r.Service); err != nil {
				s.log.Warn("skipping unreadable service record", "host", host, "error", err)
				r.ModRev = -1
				continue
			}
			r.ModRev, r.CreateRev = kv.ModRevision, kv.CreateRevision
		case rest == "alive":
			rec(host).Alive = true
		case strings.HasPrefix(rest, "instances/"):
			r := rec(host)
			r.Instances = append(r.Instances, strings.TrimPrefix(rest, "instances/"))
		case strings.HasPrefix(rest, "builds/"):
			rec(host).Builds++
		}
	}
	for h, r := range out {
		if r.ModRev <= 0 { // no (readable) service record
			delete(out, h)
			continue
		}
		sort.Strings(r.Instances)
	}
	return out, resp.Header.Revision, nil
}

// Get is one host, nil when it has no service record.
func (s *Store) Get(ctx context.Context, host string) (*Host, error) {
	if host == "" || strings.Contains(host, "/") {
		return nil, nil
	}
	resp, err := s.cli.Get(ctx, s.keys.HostPrefix(host), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read host %s: %w", host, err)
	}
	h := &Host{readRev: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		_, rest, err := s.keys.ParseHostKey(string(kv.Key))
		if err != nil {
			continue
		}
		switch {
		case rest == "service":
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &h.Service); err != nil {
				return nil, err
			}
			h.ModRev, h.CreateRev = kv.ModRevision, kv.CreateRevision
		case rest == "alive":
			h.Alive = true
		case strings.HasPrefix(rest, "instances/"):
			h.Instances = append(h.Instances, strings.TrimPrefix(rest, "instances/"))
		case strings.HasPrefix(rest, "builds/"):
			h.Builds++
		}
	}
	if h.ModRev == 0 {
		return nil, nil
	}
	sort.Strings(h.Instances)
	return h, nil
}

// Sorted returns hosts ordered by name.
func Sorted(hosts map[string]*Host) []*Host {
	out := make([]*Host, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, h)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Service.Host < out[b].Service.Host })
	return out
}

// Providers returns the providers named by hosts' service records, read
// at rev (0: now), by uuid.
func (s *Store) Providers(ctx context.Context, rev int64) (map[string]*etcdschema.Provider, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.keys.Providers(), opts...)
	if err != nil {
		return nil, fmt.Errorf("read providers: %w", err)
	}
	out := map[string]*etcdschema.Provider{}
	for _, kv := range resp.Kvs {
		var p etcdschema.Provider
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &p); err != nil {
			s.log.Warn("skipping unreadable provider", "error", err)
			continue
		}
		out[p.UUID] = &p
	}
	return out, nil
}

// Mappings returns the host mappings at rev (0: now): host to cell.
func (s *Store) Mappings(ctx context.Context, rev int64) (map[string]string, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, s.keys.HostMappings(), opts...)
	if err != nil {
		return nil, fmt.Errorf("read host mappings: %w", err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		var m etcdschema.HostMapping
		if etcdschema.Decode(string(kv.Key), kv.Value, &m) == nil {
			out[m.Host] = m.Cell
		}
	}
	return out, nil
}

func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error, kv ...any) error {
	return etcdretry.Do(ctx, storePatience, op, func(attempt int, err error) {
		s.log.Warn(what+": etcd cannot commit for now, retrying", append(kv[:len(kv):len(kv)], "attempt", attempt, "error", err)...)
	})
}

// Server is an instance on a host, as os-hypervisors lists it.
type Server struct{ UUID, Name string }

// Servers names the instances of h from their cell's instance records
// (in one transaction); an instance whose record is not there yet is
// listed by its uuid alone.
func (s *Store) Servers(ctx context.Context, h *Host) ([]Server, error) {
	out := make([]Server, len(h.Instances))
	var ops []clientv3.Op
	for i, id := range h.Instances {
		out[i] = Server{UUID: id}
		ops = append(ops, clientv3.OpGet(s.keys.CellInstance(h.Service.Cell, id)))
	}
	for start := 0; start < len(ops); start += 128 {
		end := min(start+128, len(ops))
		resp, err := s.cli.Txn(ctx).Then(ops[start:end]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instances of %s: %w", h.Service.Host, err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			var inst etcdschema.Instance
			if etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &inst) == nil {
				out[start+i].Name = inst.Name
			}
		}
	}
	return out, nil
}
