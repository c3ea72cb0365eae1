package compute

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/berth-project/berth/aggregates"
	"github.com/berth-project/berth/etcdschema"
)

// The os-aggregates resource: nova/api/openstack/compute/aggregates.py
// over package aggregates (which /v1 shares), in Nova's words.
// Aggregates are named by Nova's integer id. Nova's
// /os-aggregates/{id}/images (2.81, image pre-caching) is not served:
// Berth's drivers have no image cache.

const mvAggregateUUID = 41 // uuid in the aggregate view

// SetAggregateMirror gives the API placement, into whose aggregates a
// host added to an aggregate is mirrored (as /v1 does).
func (a *API) SetAggregateMirror(p aggregates.ProviderAggregates) {
	a.aggregates = aggregates.New(a.cli, a.keys, p, a.log.Named("aggregates"))
}

// aggregateID is utils.validate_integer(id, 'id'): Python's int() of the
// path's id, else 400. Nova then looks the id up, so an id no aggregate
// has (negative, or past int64) is its 404.
func aggregateID(c *reqCtx) (aggregates.Ref, *fault) {
	n, ok := pyInt(c.vars["id"])
	if !ok {
		return aggregates.Ref{}, errBadRequest("Invalid input received: id must be an integer")
	}
	if !n.IsInt64() || n.Int64() < 1 || n.Int64() > int64(^uint(0)>>1) {
		return aggregates.ByID(-1), nil // matches no aggregate
	}
	return aggregates.ByID(int(n.Int64())), nil
}

// novaTime is a naive datetime as jsonutils.to_primitive writes it.
func novaTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000")
}

// aggregateView is _marshall_aggregate: the Aggregate object's fields in
// their order (uuid from 2.41; hosts and metadata but in the create
// answer), then availability_zone.
func aggregateView(c *reqCtx, ag *etcdschema.Aggregate, created bool) obj {
	o := obj{{"id", ag.ID}}
	if c.v.atLeast(mvAggregateUUID) {
		o = append(o, member{"uuid", ag.UUID})
	}
	o = append(o, member{"name", ag.Name})
	if !created {
		hosts := ag.Hosts
		if hosts == nil {
			hosts = []string{}
		}
		meta := ag.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		o = append(o, member{"hosts", hosts}, member{"metadata", meta})
	}
	var zone any
	if z := ag.AvailabilityZone(); z != "" {
		zone = z
	}
	return append(o, member{"created_at", novaTime(ag.CreatedAt)}, member{"updated_at", novaTime(ag.UpdatedAt)},
		member{"deleted_at", nil}, member{"deleted", false}, member{"availability_zone", zone})
}

func wrapAggregate(c *reqCtx, ag *etcdschema.Aggregate) (int, any, error) {
	return http.StatusOK, obj{{"aggregate", aggregateView(c, ag, false)}}, nil
}

// aggregateAction names the operation for Nova's InvalidAggregateAction
// messages ("Cannot <action> aggregate <id>. Reason: <reason>.").
type aggregateAction string

const (
	actionAdd        aggregateAction = "add host to"
	actionUpdate     aggregateAction = "update"
	actionUpdateMeta aggregateAction = "update metadata of"
	// actionDelete is InvalidAggregateActionDelete's words, which Nova
	// gives a delete refused for its hosts.
	actionDelete aggregateAction = "remove host from"
)

func invalidAggregateAction(status int, act aggregateAction, id, reason string) *fault {
	return &fault{status: status, message: "Cannot " + string(act) + " aggregate " + id + ". Reason: " + reason + "."}
}

// aggregateFault words an error of package aggregates as Nova's handler
// for act does; other errors are the store's (a 503).
func aggregateFault(err error, act aggregateAction, id, host string) error {
	var (
		exists   *aggregates.NameExistsError
		conflict *aggregates.ZoneConflictError
		servers  *aggregates.ServersInZoneError
		notEmpty *aggregates.NotEmptyError
		mirror   *aggregates.MirrorError
	)
	// add_host answers 409 for the zone rules; update and set_metadata 400.
	status := http.StatusBadRequest
	if act == actionAdd {
		status = http.StatusConflict
	}
	switch {
	case errors.Is(err, aggregates.ErrNotFound):
		return errNotFound("Aggregate " + id + " could not be found.")
	case errors.Is(err, aggregates.ErrHostNotFound):
		return errNotFound("Compute host " + host + " could not be found.")
	case errors.Is(err, aggregates.ErrHostExists):
		return errConflict("Aggregate " + id + " already has host " + host + ".")
	case errors.Is(err, aggregates.ErrContention):
		return errConflict("Aggregates kept changing; try again.")
	case errors.As(err, &exists):
		return errConflict("Aggregate " + exists.Name + " already exists.")
	case errors.As(err, &conflict):
		return invalidAggregateAction(status, act, id, "One or more hosts already in availability zone(s) "+strReprs(conflict.Others))
	case errors.As(err, &servers):
		return invalidAggregateAction(status, act, id, "One or more hosts contain instances in this zone")
	case errors.As(err, &notEmpty):
		return invalidAggregateAction(http.StatusBadRequest, actionDelete, id, "Host aggregate is not empty")
	case errors.As(err, &mirror):
		// Nova only logs a failed mirror (sync_aggregates repairs it);
		// Berth says so, as /v1 does, so the operator can retry.
		return &fault{status: http.StatusServiceUnavailable, message: "Aggregate " + id + " was changed but placement could not be updated for host " +
			host + ": " + mirror.Err.Error() + ". Add the host again (or remove it again) to retry."}
	}
	return err
}

// listAggregates is AggregateController.index.
func (a *API) listAggregates(c *reqCtx) (int, any, error) {
	set, err := a.aggregates.List(c.r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := []obj{}
	for _, ag := range set.All() {
		out = append(out, aggregateView(c, ag, false))
	}
	return http.StatusOK, obj{{"aggregates", out}}, nil
}

// createAggregate is AggregateController.create: 200 (not 201), the
// view without hosts and metadata.
func (a *API) createAggregate(c *reqCtx) (int, any, error) {
	b, _ := c.body.(obj).get("aggregate")
	body := b.(obj)
	name, _ := body.get("name")
	zone := ""
	if z, ok := body.get("availability_zone"); ok && z != nil {
		zone = normalizeName(z.(string))
	}
	ag, err := a.aggregates.Create(c.r.Context(), normalizeName(name.(string)), zone)
	if err != nil {
		return 0, nil, aggregateFault(err, actionAdd, "", "")
	}
	return http.StatusOK, obj{{"aggregate", aggregateView(c, ag, true)}}, nil
}

// normalizeName is common.normalize_name: surrounding whitespace goes.
func normalizeName(s string) string { return strings.TrimSpace(s) }

// showAggregate is AggregateController.show.
func (a *API) showAggregate(c *reqCtx) (int, any, error) {
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	ag, err := a.aggregates.Find(c.r.Context(), ref)
	if err != nil {
		return 0, nil, aggregateFault(err, actionUpdate, c.vars["id"], "")
	}
	return wrapAggregate(c, ag)
}

// updateAggregate is AggregateController.update: a name (stripped)
// and/or a zone; a null zone is refused as an empty one. Unlike Nova,
// which saves the new name before it checks the zone, a refused zone
// leaves the name as it was.
func (a *API) updateAggregate(c *reqCtx) (int, any, error) {
	b, _ := c.body.(obj).get("aggregate")
	body := b.(obj)
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	id := c.vars["id"]
	ctx := c.r.Context()
	var name, zone *string
	if n, ok := body.get("name"); ok {
		s := normalizeName(n.(string))
		name = &s
	}
	if z, ok := body.get("availability_zone"); ok {
		cur, err := a.aggregates.Find(ctx, ref)
		if err != nil {
			return 0, nil, aggregateFault(err, actionUpdate, id, "")
		}
		if z == nil {
			shown := cur.Name
			if name != nil {
				shown = *name
			}
			return 0, nil, invalidAggregateAction(http.StatusBadRequest, actionUpdate, id,
				"Aggregate "+shown+" does not support empty named availability zone")
		}
		s := z.(string)
		zone = &s
	}
	ag, err := a.aggregates.Update(ctx, ref, name, zone)
	if err != nil {
		return 0, nil, aggregateFault(err, actionUpdate, id, "")
	}
	return wrapAggregate(c, ag)
}

// deleteAggregate is AggregateController.delete: 200 with no body.
func (a *API) deleteAggregate(c *reqCtx) (int, any, error) {
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	if err := a.aggregates.Delete(c.r.Context(), ref); err != nil {
		return 0, nil, aggregateFault(err, actionDelete, c.vars["id"], "")
	}
	return http.StatusOK, nil, nil
}

// actionHost is the host of an add_host or remove_host body.
func actionHost(c *reqCtx, action string) string {
	b, _ := c.body.(obj).get(action)
	h, _ := b.(obj).get("host")
	return h.(string)
}

// addAggregateHost is the add_host action.
func (a *API) addAggregateHost(c *reqCtx) (int, any, error) {
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	host := actionHost(c, "add_host")
	ag, err := a.aggregates.AddHost(c.r.Context(), ref, host)
	if err != nil {
		return 0, nil, aggregateFault(err, actionAdd, c.vars["id"], host)
	}
	return wrapAggregate(c, ag)
}

// removeAggregateHost is the remove_host action: Nova answers every
// "not found" (aggregate, host, host not in it) with one message.
func (a *API) removeAggregateHost(c *reqCtx) (int, any, error) {
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	host := actionHost(c, "remove_host")
	ag, err := a.aggregates.RemoveHost(c.r.Context(), ref, host)
	switch {
	case errors.Is(err, aggregates.ErrNotFound) || errors.Is(err, aggregates.ErrHostNotInAggregate) ||
		errors.Is(err, aggregates.ErrHostNotFound):
		return 0, nil, errNotFound("Cannot remove host " + host + " in aggregate " + c.vars["id"])
	case err != nil:
		return 0, nil, aggregateFault(err, actionUpdate, c.vars["id"], host)
	}
	return wrapAggregate(c, ag)
}

// setAggregateMetadata is the set_metadata action: null deletes a key,
// but the zone key cannot be emptied (null or "").
func (a *API) setAggregateMetadata(c *reqCtx) (int, any, error) {
	ref, f := aggregateID(c)
	if f != nil {
		return 0, nil, f
	}
	b, _ := c.body.(obj).get("set_metadata")
	m, _ := b.(obj).get("metadata")
	meta := map[string]*string{}
	for _, kv := range m.(obj) {
		if kv.v == nil {
			meta[kv.k] = nil
			continue
		}
		s := kv.v.(string)
		meta[kv.k] = &s
	}
	id := c.vars["id"]
	ctx := c.r.Context()
	if z, ok := meta[etcdschema.AggregateAZKey]; ok && (z == nil || *z == "") {
		cur, err := a.aggregates.Find(ctx, ref)
		if err != nil {
			return 0, nil, aggregateFault(err, actionUpdateMeta, id, "")
		}
		return 0, nil, invalidAggregateAction(http.StatusBadRequest, actionUpdateMeta, id,
			"Aggregate "+cur.Name+" does not support empty named availability zone")
	}
	ag, err := a.aggregates.SetMetadata(ctx, ref, meta)
	if err != nil {
		return 0, nil, aggregateFault(err, actionUpdateMeta, id, "")
	}
	return wrapAggregate(c, ag)
}
