package compute

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/servers"
)

// The cold-move server actions: servers.py _resize,
// _action_confirm_resize and _action_revert_resize, and
// migrate_server.py _migrate, over package servers (move.go). Their
// answers and refusals are Nova 26's.

// mvMigrateHost is the microversion from which migrate takes a host.
const mvMigrateHost = 56

// flavorRef is parameter_types.flavor_ref.
var flavorRef = schema{kType{"string", "integer"}, kMinLength(1)}

var (
	// schemaResize is schemas/servers.py resize (OS-DCF:diskConfig
	// accepted and ignored: Berth has no disk config).
	schemaResize = wrapped("resize", object(kProperties{
		{"flavorRef", flavorRef},
		{"OS-DCF:diskConfig", schema{kType{"string"}, kEnum{"AUTO", "MANUAL"}}},
	}, "flavorRef"))
	// schemaMigrate2_56 is schemas/migrate_server.py migrate_v2_56.
	schemaMigrate2_56 = schema{kType{"object"},
		kProperties{{"migrate", schema{kType{"object", "null"}, kProperties{{"host", fqdn}}, kNoAdditional{props: []string{"host"}}}}},
		kRequired{"migrate"}, kNoAdditional{props: []string{"migrate"}}}
)

// SetAllowResizeToSameHost is Nova's allow_resize_to_same_host (default
// false): a resize may then land on the server's own host.
func (a *API) SetAllowResizeToSameHost(ok bool) { a.allowResizeToSameHost = ok }

// resizeServer is ServersController._resize: 202, or Nova's refusals.
func (a *API) resizeServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:servers:resize"))
	if err != nil {
		return 0, nil, err
	}
	inner, _ := c.body.(obj).get("resize")
	ref := fmt.Sprint(mustGet(inner.(obj), "flavorRef"))
	flavorID := ref[strings.LastIndex(ref, "/")+1:]
	stored, err := a.flavors.get(c.r.Context(), flavorID)
	if err != nil {
		var f *fault
		if errors.As(err, &f) {
			// Nova 26 answers FlavorNotFound's own words here
			// (testdata/nova_moves.json).
			return 0, nil, errBadRequest("Flavor " + flavorID + " could not be found.")
		}
		return 0, nil, err
	}
	if !stored.IsPublic() && !c.isAdmin() && !containsString(stored.Projects, v.ProjectID()) {
		return 0, nil, errBadRequest("Flavor " + flavorID + " could not be found.")
	}
	flavor := stored.Flavor
	_, err = a.servers.Move(c.r.Context(), v.ID(), servers.MoveRequest{NewFlavor: &flavor,
		AllowSameHost: a.allowResizeToSameHost, RequestID: c.requestID})
	if err != nil {
		return 0, nil, moveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// migrateServer is MigrateServerController._migrate: a cold migration,
// from 2.56 optionally to a named host.
func (a *API) migrateServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:os-migrate-server:migrate"))
	if err != nil {
		return 0, nil, err
	}
	host := ""
	if c.v.atLeast(mvMigrateHost) {
		if inner, ok := c.body.(obj).get("migrate"); ok && inner != nil {
			if h, ok := inner.(obj).get("host"); ok && h != nil {
				host = h.(string)
			}
		}
	}
	if _, err := a.servers.Move(c.r.Context(), v.ID(), servers.MoveRequest{Host: host, RequestID: c.requestID}); err != nil {
		return 0, nil, moveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// confirmResize is ServersController._action_confirm_resize: 204.
func (a *API) confirmResize(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:servers:confirm_resize"))
	if err != nil {
		return 0, nil, err
	}
	if err := a.servers.ConfirmResize(c.r.Context(), v.ID(), c.requestID); err != nil {
		return 0, nil, moveFault(err, v.ID())
	}
	return http.StatusNoContent, nil, nil
}

// revertResize is ServersController._action_revert_resize: 202.
func (a *API) revertResize(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectMemberOrAdmin("os_compute_api:servers:revert_resize"))
	if err != nil {
		return 0, nil, err
	}
	if err := a.servers.RevertResize(c.r.Context(), v.ID(), c.requestID); err != nil {
		return 0, nil, moveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// moveFault words a move operation's error as Nova's handlers do.
func moveFault(err error, id string) error {
	var se *servers.StateError
	var nm *servers.NoMigrationError
	var he *servers.HostError
	var over *quotas.OverQuotaError
	switch {
	case errors.As(err, &over):
		// _check_quota_for_upsize's TooManyInstances.
		return &fault{status: http.StatusForbidden, message: over.Message}
	case errors.As(err, &se):
		// common.raise_http_conflict_for_instance_invalid_state.
		return errConflict(se.Error())
	case errors.As(err, &nm):
		return errBadRequest("Instance has not been resized.")
	case errors.As(err, &he):
		return errBadRequest("Compute host " + he.Host + " could not be found.")
	case errors.Is(err, servers.ErrSameFlavor):
		return errBadRequest("When resizing, instances must change flavor!")
	case errors.Is(err, servers.ErrZeroDisk):
		return errBadRequest("Server disk was unable to be resized because: Resize to zero disk flavor is not allowed.")
	case errors.Is(err, servers.ErrSameHost):
		return errBadRequest("Cannot migrate to the host where the server exists.")
	case errors.Is(err, servers.ErrNotFound):
		return instanceNotFound(id)
	case errors.Is(err, servers.ErrKeptChanging):
		return errConflict(fmt.Sprintf("Instance %s changed during the request; try again.", id))
	}
	return err
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
