// Package dump reads everything Berth keeps under its etcd prefix at one
// revision and presents it for bug reports (`berth debug dump`): every
// value decoded with the etcdschema type its key names, grouped by kind,
// and a summary of hosts, cells, in-flight work and coordination.
//
// A dump must work on a broken deployment, which is when it is needed: a
// value that does not decode (written by another version, or corrupt) is
// kept raw beside its error, and a key no etcdschema pattern matches is
// listed as unknown; neither stops the dump.
package dump

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// Snapshot is every key under a prefix, read at one revision.
type Snapshot struct {
	Prefix   string
	Revision int64
	TakenAt  time.Time
	// Entries are the keys etcdschema knows, in key order.
	Entries []Entry
	// Unknown are the keys under the prefix no etcdschema pattern matches.
	Unknown []Entry
	// Cluster is etcd's own view of its members, read after the keys.
	Cluster *Cluster
}

// Entry is one key with its decoded value or its decode error.
type Entry struct {
	Key    string
	Parsed etcdschema.ParsedKey
	// Value is the decoded value: an etcdschema value type, or a string
	// for an election candidate. Nil when Err is set.
	Value any
	Raw   []byte
	Err   error

	CreateRevision int64
	ModRevision    int64
	Lease          int64 // 0: not lease-bound
}

// Options tune Take.
type Options struct {
	// afterRevision, when set (by tests), runs once the read's revision
	// is chosen, before anything is read at it.
	afterRevision func(attempt int)
}

// Take reads every key under keys.All() at one revision (informer.List's
// pinned, streamed read), so the dump is a consistent snapshot even while
// Berth keeps writing. If etcd compacts that revision before the read is
// done, the read starts over at a new one.
func Take(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, opts Options) (*Snapshot, error) {
	const attempts = 3
	var err error
	for i := 0; i < attempts; i++ {
		var s *Snapshot
		s, err = take(ctx, cli, keys, opts, i+1)
		if err == nil {
			s.Cluster = readCluster(ctx, cli)
			return s, nil
		}
		if !errors.Is(err, rpctypes.ErrCompacted) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("dump %s: revision compacted during the read %d times: %w", keys.All(), attempts, err)
}

func take(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, o Options, attempt int) (*Snapshot, error) {
	s := &Snapshot{Prefix: keys.Prefix(), TakenAt: time.Now().UTC()}
	// The revision is read first (a read of the prefix's own key costs
	// nothing), so the test hook runs between choosing it and reading.
	resp, err := cli.Get(ctx, keys.All())
	if err != nil {
		return nil, fmt.Errorf("dump %s: read the revision: %w", keys.All(), err)
	}
	s.Revision = resp.Header.Revision
	if o.afterRevision != nil {
		o.afterRevision(attempt)
	}
	_, err = informer.ListRaw(ctx, cli, keys.All(), s.Revision, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			e := decode(keys, string(kv.Key), kv.Value)
			e.CreateRevision, e.ModRevision, e.Lease = kv.CreateRevision, kv.ModRevision, kv.Lease
			if e.Parsed.Kind == "" {
				s.Unknown = append(s.Unknown, e)
			} else {
				s.Entries = append(s.Entries, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	return s, nil
}

// decode names the key's kind and decodes its value with the kind's type.
// An unknown key has an empty Parsed.Kind and its parse error.
func decode(keys etcdschema.Keys, key string, raw []byte) Entry {
	e := Entry{Key: key, Raw: append([]byte(nil), raw...)}
	pk, err := keys.ParseKey(key)
	if err != nil {
		e.Err = err
		return e
	}
	e.Parsed = pk
	if pk.Kind == etcdschema.KindElectionCandidate || pk.Kind == etcdschema.KindBenchCAS {
		// etcd's election value (the candidate's id), or berth bench's
		// baseline counter: plain strings, not versioned JSON.
		e.Value = string(raw)
		return e
	}
	v := etcdschema.NewValue(pk.Kind)
	if v == nil {
		e.Err = fmt.Errorf("no value type for kind %s", pk.Kind)
		return e
	}
	if err := etcdschema.Decode(key, raw, v); err != nil {
		e.Err = err
		return e
	}
	e.Value = v
	return e
}

// Undecodable lists the known keys whose value did not decode.
func (s *Snapshot) Undecodable() []Entry {
	var out []Entry
	for _, e := range s.Entries {
		if e.Err != nil {
			out = append(out, e)
		}
	}
	return out
}

// Group is the name a kind's entries are listed under in the JSON dump and
// counted under in the summary.
func Group(kind etcdschema.KeyKind) string {
	if g, ok := groups[kind]; ok {
		return g
	}
	return string(kind)
}

var groups = map[etcdschema.KeyKind]string{
	etcdschema.KindProvider:                "providers",
	etcdschema.KindProviderName:            "provider_names",
	etcdschema.KindConsumer:                "consumers",
	etcdschema.KindCustomTrait:             "custom_traits",
	etcdschema.KindCustomResourceClass:     "custom_resource_classes",
	etcdschema.KindService:                 "services",
	etcdschema.KindAlive:                   "alive",
	etcdschema.KindHostInstance:            "host_instances",
	etcdschema.KindHostSync:                "host_syncs",
	etcdschema.KindHostDown:                "hosts_down",
	etcdschema.KindHostDrain:               "host_drains",
	etcdschema.KindHostCapacity:            "host_capacities",
	etcdschema.KindShelvedOffload:          "shelved_offloads",
	etcdschema.KindBuild:                   "builds",
	etcdschema.KindFlavor:                  "flavors",
	etcdschema.KindBuildRequest:            "build_requests",
	etcdschema.KindBuildRequestLease:       "build_request_leases",
	etcdschema.KindBuildRequestHolder:      "build_request_holders",
	etcdschema.KindInstanceMapping:         "instance_mappings",
	etcdschema.KindAlternates:              "alternates",
	etcdschema.KindImage:                   "images",
	etcdschema.KindServerGroup:             "server_groups",
	etcdschema.KindServerGroupMember:       "server_group_members",
	etcdschema.KindServerGroupSlot:         "server_group_slots",
	etcdschema.KindServerGroupAffinityHost: "server_group_affinity_hosts",
	etcdschema.KindAggregate:               "aggregates",
	etcdschema.KindAggregateName:           "aggregate_names",
	etcdschema.KindAggregateLastID:         "aggregate_last_id",
	etcdschema.KindCell:                    "cells",
	etcdschema.KindHostMapping:             "host_mappings",
	etcdschema.KindCellInstance:            "instances",
	etcdschema.KindRetry:                   "retries",
	etcdschema.KindRetryLease:              "retry_leases",
	etcdschema.KindRetryHolder:             "retry_holders",
	etcdschema.KindMigration:               "migrations",
	etcdschema.KindMigrationMapping:        "migration_mappings",
	etcdschema.KindMoveRequest:             "move_requests",
	etcdschema.KindMoveRequestLease:        "move_request_leases",
	etcdschema.KindMoveRequestHolder:       "move_request_holders",
	etcdschema.KindElectionCandidate:       "election_candidates",
	etcdschema.KindMember:                  "members",
	etcdschema.KindBenchCAS:                "bench_cas",
	etcdschema.KindIdentitySigningKey:      "identity_signing_key",
	etcdschema.KindQuotaSet:                "quota_sets",
	etcdschema.KindQuotaFence:              "quota_fences",
	etcdschema.KindQuotaInstance:           "quota_instances",
	etcdschema.KindQuotaIndex:              "quota_index",
	etcdschema.KindServerCounts:            "server_counts",
}

// ---- summary ---------------------------------------------------------------

// Summary is what the table shows, derived from the snapshot alone.
type Summary struct {
	Revision    int64          `json:"revision"`
	Keys        int            `json:"keys"`
	Counts      map[string]int `json:"counts"` // entries per group
	Undecodable int            `json:"undecodable"`
	Unknown     int            `json:"unknown"`
	Hosts       []HostSummary  `json:"hosts"`
	Cells       []CellSummary  `json:"cells"`
	InFlight    InFlight       `json:"in_flight"`
	// Leaders has one entry per election role with a candidate.
	Leaders []Leader `json:"leaders"`
	// Members lists each role's registrations.
	Members map[string][]MemberSummary `json:"members"`
}

// HostSummary is one host as the API's host list shows it, from etcd.
type HostSummary struct {
	Host string `json:"host"`
	Cell string `json:"cell"`
	// Mapped: a host mapping puts the host in Cell (else Cell is the one
	// its service record asks for).
	Mapped bool `json:"mapped"`
	// Service: the host has a readable service record; without one the
	// API does not list it.
	Service        bool                     `json:"service"`
	State          string                   `json:"state"`  // up, down
	Status         string                   `json:"status"` // enabled, disabled
	DisabledReason string                   `json:"disabled_reason,omitempty"`
	ForcedDown     bool                     `json:"forced_down"`
	DownSince      *time.Time               `json:"down_since,omitempty"` // the leader's record
	Instances      int                      `json:"instances"`            // instance info keys
	Builds         int                      `json:"builds"`               // build casts not yet taken
	Deletes        int                      `json:"deletes"`              // delete casts not yet taken
	Provider       string                   `json:"provider_uuid,omitempty"`
	Resources      map[string]ResourceUsage `json:"resources,omitempty"`
}

// ResourceUsage is one resource class of a host's provider.
type ResourceUsage struct {
	Used     int64 `json:"used"`
	Capacity int64 `json:"capacity"`
}

// CellSummary counts one cell's instances by status and its retries.
type CellSummary struct {
	Cell          string         `json:"cell"`
	Record        bool           `json:"record"` // a cell record exists (cell0 never has one)
	Disabled      bool           `json:"disabled"`
	Hosts         int            `json:"hosts"` // host mappings to it
	Instances     map[string]int `json:"instances"`
	Retries       int            `json:"retries"`
	RetriesLeased int            `json:"retries_leased"`
}

// InFlight is work started and not finished.
type InFlight struct {
	BuildRequests       int `json:"build_requests"`
	BuildRequestsLeased int `json:"build_requests_leased"`
	Builds              int `json:"builds"`
	Deletes             int `json:"deletes"`
	Retries             int `json:"retries"`
	RetriesLeased       int `json:"retries_leased"`
	Alternates          int `json:"alternates"`
}

// Leader is an election's current leader: of its candidates, the one with
// the lowest create revision (etcd's concurrency.Election rule).
type Leader struct {
	Role           string `json:"role"`
	ID             string `json:"id"`
	Key            string `json:"key"`
	CreateRevision int64  `json:"create_revision"`
	Lease          string `json:"lease"` // hex, as in the key
	Candidates     int    `json:"candidates"`
}

// MemberSummary is one registration.
type MemberSummary struct {
	ID      string    `json:"id"`
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
}

// Summarize derives the summary. Undecodable values count only towards
// Undecodable: a host whose service record is unreadable still shows, with
// Service false.
func (s *Snapshot) Summarize() Summary {
	sum := Summary{Revision: s.Revision, Keys: len(s.Entries) + len(s.Unknown), Counts: map[string]int{},
		Unknown: len(s.Unknown), Members: map[string][]MemberSummary{}}
	hosts := map[string]*HostSummary{}
	host := func(name string) *HostSummary {
		h := hosts[name]
		if h == nil {
			h = &HostSummary{Host: name, State: "down", Status: "enabled"}
			hosts[name] = h
		}
		return h
	}
	alive := map[string]bool{}
	cells := map[string]*CellSummary{}
	cell := func(name string) *CellSummary {
		c := cells[name]
		if c == nil {
			c = &CellSummary{Cell: name, Instances: map[string]int{}}
			cells[name] = c
		}
		return c
	}
	providers := map[string]*etcdschema.Provider{}
	mappings := map[string]string{}
	buildRequests := map[string]bool{}
	brLeases := map[string]bool{}
	retries := map[[2]string]bool{}
	retryLeases := map[[2]string]bool{}
	leaders := map[string]*Leader{}

	for _, e := range s.Entries {
		sum.Counts[Group(e.Parsed.Kind)]++
		if e.Err != nil {
			sum.Undecodable++
			// The key alone still says the host or cell exists.
			switch e.Parsed.Kind {
			case etcdschema.KindService:
				host(e.Parsed.Host)
			case etcdschema.KindCell:
				cell(e.Parsed.Cell).Record = true
			}
			continue
		}
		p := e.Parsed
		switch v := e.Value.(type) {
		case *etcdschema.Service:
			h := host(p.Host)
			h.Service = true
			if h.Cell == "" {
				h.Cell = v.Cell
			}
			h.Provider, h.ForcedDown, h.DisabledReason = v.ProviderUUID, v.ForcedDown, v.DisabledReason
			if v.Disabled {
				h.Status = "disabled"
			}
		case *etcdschema.Alive:
			alive[p.Host] = true
			host(p.Host)
		case *etcdschema.HostDown:
			since := v.Since
			host(p.Host).DownSince = &since
		case *etcdschema.InstanceInfo:
			host(p.Host).Instances++
		case *etcdschema.Build:
			if v.Op == etcdschema.OpDelete {
				host(p.Host).Deletes++
				sum.InFlight.Deletes++
			} else {
				host(p.Host).Builds++
				sum.InFlight.Builds++
			}
		case *etcdschema.HostSync:
			host(p.Host)
		case *etcdschema.HostMapping:
			mappings[p.Host] = v.Cell
			cell(v.Cell).Hosts++
		case *etcdschema.Provider:
			providers[v.UUID] = v
		case *etcdschema.Cell:
			c := cell(p.Cell)
			c.Record, c.Disabled = true, v.Disabled
		case *etcdschema.Instance:
			cell(p.Cell).Instances[v.Status]++
		case *etcdschema.Retry:
			retries[[2]string{p.Cell, p.UUID}] = true
		case *etcdschema.Lease:
			switch p.Kind { // queue holder registrations are Leases too
			case etcdschema.KindRetryLease:
				retryLeases[[2]string{p.Cell, p.UUID}] = true
			case etcdschema.KindBuildRequestLease:
				brLeases[p.UUID] = true
			}
		case *etcdschema.BuildRequest:
			buildRequests[p.UUID] = true
		case *etcdschema.Alternates:
			sum.InFlight.Alternates++
		case *etcdschema.Member:
			sum.Members[p.Role] = append(sum.Members[p.Role], MemberSummary{ID: v.ID, URL: v.URL, Started: v.Started})
		case string: // election candidate
			l := leaders[p.Role]
			if l == nil {
				l = &Leader{Role: p.Role}
				leaders[p.Role] = l
			}
			l.Candidates++
			if l.Key == "" || e.CreateRevision < l.CreateRevision {
				l.ID, l.Key, l.CreateRevision, l.Lease = v, e.Key, e.CreateRevision, p.ID
			}
		}
	}

	for name, h := range hosts {
		if c, ok := mappings[name]; ok {
			h.Cell, h.Mapped = c, true
		}
		// Nova's service_is_up, as the API computes it: forced_down wins.
		if alive[name] && !h.ForcedDown {
			h.State = "up"
		}
		if pr := providers[h.Provider]; pr != nil {
			h.Resources = map[string]ResourceUsage{}
			for rc, inv := range pr.Inventories {
				h.Resources[rc] = ResourceUsage{Used: pr.Usages[rc], Capacity: inv.Capacity()}
			}
		}
		sum.Hosts = append(sum.Hosts, *h)
	}
	sort.Slice(sum.Hosts, func(a, b int) bool { return sum.Hosts[a].Host < sum.Hosts[b].Host })

	for k := range retries {
		c := cell(k[0])
		c.Retries++
		sum.InFlight.Retries++
		if retryLeases[k] {
			c.RetriesLeased++
			sum.InFlight.RetriesLeased++
		}
	}
	for u := range buildRequests {
		sum.InFlight.BuildRequests++
		if brLeases[u] {
			sum.InFlight.BuildRequestsLeased++
		}
	}
	for _, c := range cells {
		sum.Cells = append(sum.Cells, *c)
	}
	sort.Slice(sum.Cells, func(a, b int) bool { return sum.Cells[a].Cell < sum.Cells[b].Cell })
	for _, l := range leaders {
		sum.Leaders = append(sum.Leaders, *l)
	}
	sort.Slice(sum.Leaders, func(a, b int) bool { return sum.Leaders[a].Role < sum.Leaders[b].Role })
	for role := range sum.Members {
		ms := sum.Members[role]
		sort.Slice(ms, func(a, b int) bool { return ms[a].ID < ms[b].ID })
	}
	return sum
}
