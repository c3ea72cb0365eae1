package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// ProviderAggregates is what the aggregates API needs of placement: to put
// a host's compute node provider in or out of a placement aggregate, as
// Nova's API does (aggregate_add_host / aggregate_remove_host), so that
// request filters can ask placement for member_of.
type ProviderAggregates interface {
	UpdateProvider(ctx context.Context, uuid string, mutate func(p *etcdschema.Provider) error) error
}

// AggregateView is an aggregate as the API shows it (Nova's shape; id is
// the uuid).
type AggregateView struct {
	ID               string            `json:"id"`
	UUID             string            `json:"uuid"`
	Name             string            `json:"name"`
	AvailabilityZone *string           `json:"availability_zone"`
	Hosts            []string          `json:"hosts"`
	Metadata         map[string]string `json:"metadata"`
	Created          time.Time         `json:"created_at"`
	Updated          time.Time         `json:"updated_at"`
}

func aggregateView(a *etcdschema.Aggregate) AggregateView {
	v := AggregateView{ID: a.UUID, UUID: a.UUID, Name: a.Name, Hosts: a.Hosts, Metadata: a.Metadata,
		Created: a.CreatedAt, Updated: a.UpdatedAt}
	if z := a.AvailabilityZone(); z != "" {
		v.AvailabilityZone = &z
	}
	if v.Hosts == nil {
		v.Hosts = []string{}
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	return v
}

// apiError is an answer with a status, for the aggregate mutations.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func failf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// aggregateSet is every aggregate read at one revision.
type aggregateSet struct {
	rev  int64
	byID map[string]*etcdschema.Aggregate
	mods map[string]int64
}

func (s *Server) readAggregates(ctx context.Context) (*aggregateSet, error) {
	resp, err := s.cli.Get(ctx, s.keys.Aggregates(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read aggregates: %w", err)
	}
	set := &aggregateSet{rev: resp.Header.Revision, byID: map[string]*etcdschema.Aggregate{}, mods: map[string]int64{}}
	for _, kv := range resp.Kvs {
		var a etcdschema.Aggregate
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &a); err != nil {
			return nil, err // a rule check over a partial set could pass wrongly
		}
		set.byID[a.UUID] = &a
		set.mods[a.UUID] = kv.ModRevision
	}
	return set, nil
}

// zoneConflicts lists the zones other than zone that host's other
// aggregates put it in: Nova's rule is one AZ per host.
func (set *aggregateSet) zoneConflicts(host, except, zone string) []string {
	var out []string
	for id, a := range set.byID {
		if id == except || !a.HasHost(host) {
			continue
		}
		if z := a.AvailabilityZone(); z != "" && z != zone && !contains(out, z) {
			out = append(out, z)
		}
	}
	sort.Strings(out)
	return out
}

// mutateAggregates applies change to the aggregates read at one revision
// and writes its result only if no aggregate was created or changed since,
// retrying on a lost race. The rules (unique names, one zone per host)
// span aggregates, so a compare on the whole prefix is what keeps two
// concurrent changes from each passing the check alone. Aggregates change
// rarely; the retry is cheap.
func (s *Server) mutateAggregates(ctx context.Context, change func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error)) error {
	for try := 0; try < 10; try++ {
		set, err := s.readAggregates(ctx)
		if err != nil {
			return err
		}
		cmps, ops, err := change(set)
		if err != nil {
			return err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.Aggregates()), "<", set.rev+1).
			WithPrefix())
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("write aggregates: %w", err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return failf(http.StatusConflict, "Aggregates kept changing; try again.")
}

func (s *Server) aggregateError(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.status, ae.msg)
		return
	}
	s.writeStoreError(w, err, "")
}

type aggregateBody struct {
	Aggregate *struct {
		Name             string  `json:"name"`
		AvailabilityZone *string `json:"availability_zone"`
	} `json:"aggregate"`
}

func (s *Server) createAggregate(w http.ResponseWriter, r *http.Request) {
	var body aggregateBody
	if err := decodeBody(w, r, &body); err != nil {
		writeBodyError(w, err)
		return
	}
	b := body.Aggregate
	if b == nil || strings.TrimSpace(b.Name) == "" || len(b.Name) > 255 {
		writeError(w, http.StatusBadRequest, "Invalid input: 'aggregate' with a 'name' of 1 to 255 characters is required.")
		return
	}
	now := time.Now().UTC()
	a := &etcdschema.Aggregate{UUID: uuid.NewString(), Name: b.Name, Hosts: []string{},
		Metadata: map[string]string{}, CreatedAt: now, UpdatedAt: now}
	if b.AvailabilityZone != nil {
		if err := validZone(*b.AvailabilityZone); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		a.Metadata[etcdschema.AggregateAZKey] = *b.AvailabilityZone
	}
	k := s.keys
	err := s.mutateAggregates(r.Context(), func(*aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.AggregateName(a.Name)), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(k.Aggregate(a.UUID), etcdschema.MustEncode(a)),
				clientv3.OpPut(k.AggregateName(a.Name), etcdschema.MustEncode(&etcdschema.AggregateName{UUID: a.UUID}))}, nil
	})
	if err == nil {
		s.log.Info("aggregate created", "aggregate", a.UUID, "name", a.Name, "request_id", requestID(r.Context()))
		writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(a)})
		return
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusConflict {
		// The name compare is what fails a duplicate: say so.
		if resp, gerr := s.cli.Get(r.Context(), k.AggregateName(a.Name)); gerr == nil && len(resp.Kvs) > 0 {
			writeError(w, http.StatusConflict, fmt.Sprintf("Aggregate %s already exists.", a.Name))
			return
		}
	}
	s.aggregateError(w, err)
}

// validZone applies Nova's rule that an AZ name is not empty and has no
// colon (the API's "az:host" syntax uses it).
func validZone(z string) error {
	if strings.TrimSpace(z) == "" || len(z) > 255 || strings.Contains(z, ":") {
		return failf(http.StatusBadRequest, "Invalid input: availability zone %q must be 1 to 255 characters without ':'.", z)
	}
	return nil
}

func (s *Server) listAggregates(w http.ResponseWriter, r *http.Request) {
	set, err := s.readAggregates(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	out := []AggregateView{}
	for _, id := range sortedKeys(set.byID) {
		out = append(out, aggregateView(set.byID[id]))
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	writeJSON(w, http.StatusOK, map[string]any{"aggregates": out})
}

func (s *Server) showAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	set, err := s.readAggregates(r.Context())
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	a, ok := set.byID[id]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Aggregate %s could not be found.", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(a)})
}

func (s *Server) deleteAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	k := s.keys
	err := s.mutateAggregates(r.Context(), func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, ok := set.byID[id]
		if !ok {
			return nil, nil, failf(http.StatusNotFound, "Aggregate %s could not be found.", id)
		}
		if len(a.Hosts) > 0 {
			return nil, nil, failf(http.StatusBadRequest, "Cannot delete aggregate %s: it still has hosts %s; remove them first.",
				id, strings.Join(a.Hosts, ", "))
		}
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k.Aggregate(id)), "=", set.mods[id])},
			[]clientv3.Op{clientv3.OpDelete(k.Aggregate(id)), clientv3.OpDelete(k.AggregateName(a.Name))}, nil
	})
	if err != nil {
		s.aggregateError(w, err)
		return
	}
	s.log.Info("aggregate deleted", "aggregate", id, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

type aggregateAction struct {
	AddHost *struct {
		Host string `json:"host"`
	} `json:"add_host"`
	RemoveHost *struct {
		Host string `json:"host"`
	} `json:"remove_host"`
	SetMetadata *struct {
		Metadata map[string]*string `json:"metadata"`
	} `json:"set_metadata"`
}

// aggregateAction is Nova's POST /os-aggregates/{id}/action: add_host,
// remove_host or set_metadata (a null value deletes a key).
func (s *Server) aggregateAction(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var act aggregateAction
	if err := decodeBody(w, r, &act); err != nil {
		writeBodyError(w, err)
		return
	}
	n := 0
	for _, set := range []bool{act.AddHost != nil, act.RemoveHost != nil, act.SetMetadata != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		writeError(w, http.StatusBadRequest, "Invalid input: give exactly one of add_host, remove_host, set_metadata.")
		return
	}
	var (
		out *etcdschema.Aggregate
		err error
	)
	switch {
	case act.AddHost != nil:
		out, err = s.addAggregateHost(r.Context(), id, act.AddHost.Host)
	case act.RemoveHost != nil:
		out, err = s.removeAggregateHost(r.Context(), id, act.RemoveHost.Host)
	default:
		out, err = s.setAggregateMetadata(r.Context(), id, act.SetMetadata.Metadata)
	}
	if err != nil {
		s.aggregateError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(out)})
}

// serviceProvider is the compute node provider of host, from its service
// record; a host that never registered is not found, as in Nova.
func (s *Server) serviceProvider(ctx context.Context, host string) (string, error) {
	key := s.keys.Service(host)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("read service of %s: %w", host, err)
	}
	if host == "" || len(resp.Kvs) == 0 {
		return "", failf(http.StatusNotFound, "Compute host %s could not be found.", host)
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &svc); err != nil {
		return "", err
	}
	return svc.ProviderUUID, nil
}

func (s *Server) addAggregateHost(ctx context.Context, id, host string) (*etcdschema.Aggregate, error) {
	rp, err := s.serviceProvider(ctx, host)
	if err != nil {
		return nil, err
	}
	var out *etcdschema.Aggregate
	already := false
	err = s.mutateAggregates(ctx, func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, ok := set.byID[id]
		if !ok {
			return nil, nil, failf(http.StatusNotFound, "Aggregate %s could not be found.", id)
		}
		if a.HasHost(host) {
			already = true
			return nil, nil, failf(http.StatusConflict, "Host %s is already in aggregate %s.", host, id)
		}
		if z := a.AvailabilityZone(); z != "" {
			if other := set.zoneConflicts(host, id, z); len(other) > 0 {
				return nil, nil, failf(http.StatusConflict,
					"Cannot add host %s to aggregate %s: it is already in availability zone(s) %s, and a host is in one zone at most.",
					host, id, strings.Join(other, ", "))
			}
		}
		next := *a
		next.Hosts = append(append([]string{}, a.Hosts...), host)
		sort.Strings(next.Hosts)
		next.UpdatedAt = time.Now().UTC()
		out = &next
		return []clientv3.Cmp{unchanged(s.keys, set, id)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(id), etcdschema.MustEncode(&next))}, nil
	})
	if err != nil && !already {
		return nil, err
	}
	// Mirror to placement after the record, as Nova does. It is idempotent,
	// so adding the host again (a 409) repairs a mirror that failed.
	if _, merr := s.mirrorAggregate(ctx, rp, id, true); merr != nil {
		s.log.Error("aggregate stored but placement not updated; add the host again to retry",
			"aggregate", id, "host", host, "error", merr)
		if err == nil {
			err = failf(http.StatusServiceUnavailable, "Host %s was added to aggregate %s but placement could not be updated: %v. Add the host again to retry.", host, id, merr)
		}
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("host added to aggregate", "aggregate", id, "host", host)
	return out, nil
}

func (s *Server) removeAggregateHost(ctx context.Context, id, host string) (*etcdschema.Aggregate, error) {
	var out *etcdschema.Aggregate
	err := s.mutateAggregates(ctx, func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, ok := set.byID[id]
		if !ok {
			return nil, nil, failf(http.StatusNotFound, "Aggregate %s could not be found.", id)
		}
		if !a.HasHost(host) {
			return nil, nil, failf(http.StatusNotFound, "Host %s is not in aggregate %s.", host, id)
		}
		next := *a
		next.Hosts = nil
		for _, h := range a.Hosts {
			if h != host {
				next.Hosts = append(next.Hosts, h)
			}
		}
		next.UpdatedAt = time.Now().UTC()
		out = &next
		return []clientv3.Cmp{unchanged(s.keys, set, id)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(id), etcdschema.MustEncode(&next))}, nil
	})
	if err != nil {
		return nil, err
	}
	if rp, perr := s.serviceProvider(ctx, host); perr == nil {
		if _, merr := s.mirrorAggregate(ctx, rp, id, false); merr != nil {
			s.log.Error("host removed from aggregate but placement not updated", "aggregate", id, "host", host, "error", merr)
			return nil, failf(http.StatusServiceUnavailable, "Host %s was removed from aggregate %s but placement could not be updated: %v.", host, id, merr)
		}
	}
	s.log.Info("host removed from aggregate", "aggregate", id, "host", host)
	return out, nil
}

// errMirrored stops a provider update that would change nothing, so that
// a repeated mirror does not bump the provider's generation.
var errMirrored = errors.New("already mirrored")

// mirrorAggregate puts provider rp in (or out of) placement aggregate id;
// changed says whether it had to.
func (s *Server) mirrorAggregate(ctx context.Context, rp, id string, in bool) (changed bool, err error) {
	p, ok := s.placement.(ProviderAggregates)
	if !ok {
		return false, errors.New("this API was built without placement's provider updates")
	}
	err = p.UpdateProvider(ctx, rp, func(pr *etcdschema.Provider) error {
		var next []string
		for _, a := range pr.Aggregates {
			if a != id {
				next = append(next, a)
			}
		}
		if present := len(next) < len(pr.Aggregates); present == in {
			return errMirrored
		}
		if in {
			next = append(next, id)
		}
		pr.Aggregates = next
		return nil
	})
	switch {
	case errors.Is(err, errMirrored):
		return false, nil
	case errors.Is(err, placement.ErrNotFound) || errors.Is(err, placement.ErrProviderNotFound):
		return false, fmt.Errorf("provider %s of the host does not exist: %w", rp, err)
	}
	return err == nil, err
}

// SyncResult is what an aggregate sync did.
type SyncResult struct {
	Hosts   int               `json:"hosts"`
	Added   int               `json:"added"`
	Failed  map[string]string `json:"failed"`
	Missing []string          `json:"missing"`
}

// syncAggregates is nova-manage placement sync_aggregates: it puts the
// compute node provider of every host of every aggregate in that
// aggregate's placement aggregate, repairing mirrors that failed or that a
// re-registered provider lost. Like Nova's it only adds. Hosts with no
// service record are reported as missing.
func (s *Server) syncAggregates(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	set, err := s.readAggregates(ctx)
	if err != nil {
		s.writeStoreError(w, err, "")
		return
	}
	res := SyncResult{Failed: map[string]string{}, Missing: []string{}}
	for _, id := range sortedKeys(set.byID) {
		for _, h := range set.byID[id].Hosts {
			res.Hosts++
			rp, err := s.serviceProvider(ctx, h)
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusNotFound {
				res.Missing = append(res.Missing, h)
				continue
			}
			if err == nil {
				var changed bool
				changed, err = s.mirrorAggregate(ctx, rp, id, true)
				if changed {
					res.Added++
				}
			}
			if err != nil {
				res.Failed[h+" in "+id] = err.Error()
			}
		}
	}
	s.log.Info("aggregates synced to placement", "hosts", res.Hosts, "added", res.Added,
		"failed", len(res.Failed), "missing", len(res.Missing))
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) setAggregateMetadata(ctx context.Context, id string, meta map[string]*string) (*etcdschema.Aggregate, error) {
	for k, v := range meta {
		if k == "" || len(k) > 255 || (v != nil && len(*v) > 255) {
			return nil, failf(http.StatusBadRequest, "Invalid input: metadata keys and values must be 1 to 255 characters (key %q).", k)
		}
		if k == etcdschema.AggregateAZKey && v != nil {
			if err := validZone(*v); err != nil {
				return nil, err
			}
		}
	}
	var out *etcdschema.Aggregate
	err := s.mutateAggregates(ctx, func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, ok := set.byID[id]
		if !ok {
			return nil, nil, failf(http.StatusNotFound, "Aggregate %s could not be found.", id)
		}
		next := editableCopy(a)
		for k, v := range meta {
			if v == nil {
				delete(next.Metadata, k)
			} else {
				next.Metadata[k] = *v
			}
		}
		if err := s.checkZoneChange(ctx, set, a, &next); err != nil {
			return nil, nil, err
		}
		next.UpdatedAt = time.Now().UTC()
		out = &next
		return []clientv3.Cmp{unchanged(s.keys, set, id)},
			[]clientv3.Op{clientv3.OpPut(s.keys.Aggregate(id), etcdschema.MustEncode(&next))}, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("aggregate metadata set", "aggregate", id, "keys", len(meta))
	return out, nil
}

// unchanged compares aggregate id as read: the prefix compare of
// mutateAggregates sees changes and creations, not a deletion.
func unchanged(k etcdschema.Keys, set *aggregateSet, id string) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(k.Aggregate(id)), "=", set.mods[id])
}

// checkZoneChange applies Nova's rules when an aggregate's zone changes
// (set_metadata or update): none of its hosts may be in another zone
// through another aggregate, and a zone with hosts that run servers cannot
// be renamed or removed, since those servers are recorded in the old one.
// The servers are counted from the hosts' instance info and build casts.
func (s *Server) checkZoneChange(ctx context.Context, set *aggregateSet, old, next *etcdschema.Aggregate) error {
	z := next.AvailabilityZone()
	if z == old.AvailabilityZone() {
		return nil
	}
	if z != "" {
		for _, h := range next.Hosts {
			if other := set.zoneConflicts(h, next.UUID, z); len(other) > 0 {
				return failf(http.StatusConflict,
					"Cannot put aggregate %s in availability zone %s: its host %s is already in %s, and a host is in one zone at most.",
					next.UUID, z, h, strings.Join(other, ", "))
			}
		}
	}
	for _, h := range next.Hosts {
		n, err := s.serversOn(ctx, h)
		if err != nil {
			return err
		}
		if n > 0 {
			return failf(http.StatusConflict,
				"Cannot change the availability zone of aggregate %s: its host %s runs %d server(s) in the current zone.",
				next.UUID, h, n)
		}
	}
	return nil
}

// serversOn counts what a host runs or is building.
func (s *Server) serversOn(ctx context.Context, host string) (int64, error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.HostInstances(host), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(s.keys.Builds(host), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("count servers on %s: %w", host, err)
	}
	return resp.Responses[0].GetResponseRange().Count + resp.Responses[1].GetResponseRange().Count, nil
}

// updateAggregate is Nova's PUT /os-aggregates/{id}: a new name and/or
// availability zone ("" or null removes the zone).
func (s *Server) updateAggregate(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	var body struct {
		Aggregate *struct {
			Name             *string         `json:"name"`
			AvailabilityZone json.RawMessage `json:"availability_zone"`
		} `json:"aggregate"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeBodyError(w, err)
		return
	}
	b := body.Aggregate
	if b == nil || (b.Name == nil && b.AvailabilityZone == nil) {
		writeError(w, http.StatusBadRequest, "Invalid input: 'aggregate' with a 'name' or an 'availability_zone' is required.")
		return
	}
	if b.Name != nil && (strings.TrimSpace(*b.Name) == "" || len(*b.Name) > 255) {
		writeError(w, http.StatusBadRequest, "Invalid input: 'name' must be 1 to 255 characters.")
		return
	}
	var zone *string // nil: unchanged; "": remove
	if b.AvailabilityZone != nil {
		var z *string
		if err := json.Unmarshal(b.AvailabilityZone, &z); err != nil {
			writeError(w, http.StatusBadRequest, "Invalid input: 'availability_zone' must be a string or null.")
			return
		}
		if z == nil {
			z = new(string)
		}
		if *z != "" {
			if err := validZone(*z); err != nil {
				s.aggregateError(w, err)
				return
			}
		}
		zone = z
	}
	ctx := r.Context()
	k := s.keys
	var out *etcdschema.Aggregate
	err := s.mutateAggregates(ctx, func(set *aggregateSet) ([]clientv3.Cmp, []clientv3.Op, error) {
		a, ok := set.byID[id]
		if !ok {
			return nil, nil, failf(http.StatusNotFound, "Aggregate %s could not be found.", id)
		}
		next := editableCopy(a)
		cmps := []clientv3.Cmp{unchanged(k, set, id)}
		ops := []clientv3.Op{}
		if b.Name != nil && *b.Name != a.Name {
			next.Name = *b.Name
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.AggregateName(next.Name)), "=", 0))
			ops = append(ops, clientv3.OpDelete(k.AggregateName(a.Name)),
				clientv3.OpPut(k.AggregateName(next.Name), etcdschema.MustEncode(&etcdschema.AggregateName{UUID: id})))
		}
		if zone != nil {
			if *zone == "" {
				delete(next.Metadata, etcdschema.AggregateAZKey)
			} else {
				next.Metadata[etcdschema.AggregateAZKey] = *zone
			}
		}
		if err := s.checkZoneChange(ctx, set, a, &next); err != nil {
			return nil, nil, err
		}
		next.UpdatedAt = time.Now().UTC()
		out = &next
		return cmps, append(ops, clientv3.OpPut(k.Aggregate(id), etcdschema.MustEncode(&next))), nil
	})
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusConflict && b.Name != nil {
		if resp, gerr := s.cli.Get(ctx, k.AggregateName(*b.Name)); gerr == nil && len(resp.Kvs) > 0 {
			var n etcdschema.AggregateName
			if etcdschema.Decode(k.AggregateName(*b.Name), resp.Kvs[0].Value, &n) == nil && n.UUID != id {
				writeError(w, http.StatusConflict, fmt.Sprintf("Aggregate %s already exists.", *b.Name))
				return
			}
		}
	}
	if err != nil {
		s.aggregateError(w, err)
		return
	}
	s.log.Info("aggregate updated", "aggregate", id, "request_id", requestID(ctx))
	writeJSON(w, http.StatusOK, map[string]any{"aggregate": aggregateView(out)})
}

// availabilityZones is every zone a request may name: the default one and
// those of the aggregates.
func (s *Server) availabilityZones(ctx context.Context) (map[string]bool, error) {
	set, err := s.readAggregates(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{s.zone(): true}
	for _, a := range set.byID {
		if z := a.AvailabilityZone(); z != "" {
			out[z] = true
		}
	}
	return out, nil
}

// editableCopy returns a copy of a whose metadata can be changed without
// touching a, which the cached aggregate set shares with other requests.
func editableCopy(a *etcdschema.Aggregate) etcdschema.Aggregate {
	next := *a
	next.Metadata = make(map[string]string, len(a.Metadata))
	for k, v := range a.Metadata {
		next.Metadata[k] = v
	}
	return next
}
