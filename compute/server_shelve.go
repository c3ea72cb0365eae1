package compute

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/berth-project/berth/servers"
)

// The shelve server actions: shelve.py ShelveController (_shelve,
// _shelve_offload, _unshelve) over package servers (shelve.go). Their
// answers and refusals are Nova 26's, read from its source
// (nova/api/openstack/compute/shelve.py, nova/compute/api.py,
// nova/exception.py).

// Microversions of unshelve's body.
const (
	mvUnshelveZone = 77 // availability_zone
	mvUnshelveHost = 91 // host, and availability_zone null
)

var (
	// schemaUnshelve2_77 is schemas/shelve.py unshelve_v277.
	schemaUnshelve2_77 = schema{kType{"object"},
		kProperties{{"unshelve", schema{kType{"object", "null"}, kProperties{{"availability_zone", nameSchema}},
			kRequired{"availability_zone"}, kNoAdditional{props: []string{"availability_zone"}}}}},
		kRequired{"unshelve"}, kNoAdditional{props: []string{"unshelve"}}}
	// schemaUnshelve2_91 is schemas/shelve.py unshelve_v291.
	schemaUnshelve2_91 = schema{kType{"object"},
		kProperties{{"unshelve", schema{kOneOf{
			{kType{"object"}, kProperties{
				{"availability_zone", schema{kOneOf{{kType{"null"}}, {kType{"string"}}}}},
				{"host", schema{kType{"string"}}},
			}, kNoAdditional{props: []string{"availability_zone", "host"}}},
			{kType{"null"}},
		}}}},
		kRequired{"unshelve"}, kNoAdditional{props: []string{"unshelve"}}}
)

// unshelveSchema is the schema of unshelve at v: none before 2.77 (Nova
// validates nothing: "body=null").
func unshelveSchema(v version) schema {
	switch {
	case v.atLeast(mvUnshelveHost):
		return schemaUnshelve2_91
	case v.atLeast(mvUnshelveZone):
		return schemaUnshelve2_77
	}
	return nil
}

// SetShelvedOffloadTime is Nova's shelved_offload_time: 0 (the default)
// offloads a shelved server as soon as it has stopped, a negative value
// never, a positive one that long after (the leader's shelved_offloads
// duty).
func (a *API) SetShelvedOffloadTime(d time.Duration) { a.shelvedOffloadTime = d }

// shelveServer is ShelveController._shelve: 202.
func (a *API) shelveServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:os-shelve:shelve"))
	if err != nil {
		return 0, nil, err
	}
	if err := a.servers.Shelve(c.r.Context(), v.ID(), c.requestID, a.shelvedOffloadTime); err != nil {
		return 0, nil, shelveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// shelveOffloadServer is ShelveController._shelve_offload: 202.
func (a *API) shelveOffloadServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:os-shelve:shelve_offload"))
	if err != nil {
		return 0, nil, err
	}
	if err := a.servers.ShelveOffload(c.r.Context(), v.ID(), c.requestID); err != nil {
		return 0, nil, shelveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// unshelveServer is ShelveController._unshelve: 202. A host needs
// os-shelve:unshelve_to_host (admin), checked where Nova checks it.
func (a *API) unshelveServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:os-shelve:unshelve"))
	if err != nil {
		return 0, nil, err
	}
	req := servers.UnshelveRequest{RequestID: c.requestID, AuthorizeHost: func() error {
		if f := c.can(adminOnly("os_compute_api:os-shelve:unshelve_to_host"), v.ProjectID()); f != nil {
			return f
		}
		return nil
	}}
	var inner obj
	if body, ok := c.body.(obj); ok {
		if u, ok := body.get("unshelve"); ok {
			inner, _ = u.(obj)
		}
	}
	// Nova reads the body only when it is a non-empty object ("if
	// unshelve_dict"), the zone from 2.77, the host from 2.91.
	if len(inner) > 0 {
		if z, ok := inner.get("availability_zone"); ok && c.v.atLeast(mvUnshelveZone) {
			req.ZoneGiven = true
			if s, ok := z.(string); ok {
				req.Zone = &s
			}
		}
		if h, ok := inner.get("host"); ok && c.v.atLeast(mvUnshelveHost) {
			if s, ok := h.(string); ok {
				req.Host = s
			}
		}
	}
	if err := a.servers.Unshelve(c.r.Context(), v.ID(), req); err != nil {
		return 0, nil, shelveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// shelveFault words a shelve action's error as shelve.py does.
func shelveFault(err error, id string) error {
	var se *servers.StateError
	var ue *servers.UnshelveStateError
	var hz *servers.HostNotInZoneError
	var he *servers.HostError
	var f *fault
	switch {
	case errors.As(err, &f):
		return f // the unshelve_to_host policy's 403
	case errors.As(err, &se):
		// common.raise_http_conflict_for_instance_invalid_state.
		return errConflict(se.Error())
	case errors.As(err, &ue):
		return errConflict(ue.Error())
	case errors.As(err, &hz):
		return errConflict(hz.Error())
	case errors.Is(err, servers.ErrZoneUnavailable):
		return errBadRequest("The requested availability zone is not available")
	case errors.As(err, &he):
		return errBadRequest("Compute host " + he.Host + " could not be found.")
	case errors.Is(err, servers.ErrNotFound):
		return instanceNotFound(id)
	case errors.Is(err, servers.ErrKeptChanging):
		return errConflict(fmt.Sprintf("Instance %s changed during the request; try again.", id))
	}
	return err
}
