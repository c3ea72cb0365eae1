package compute

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/berth-project/berth/servers"
)

// The os-resetState server action: admin_actions.py
// AdminActionsController._reset_state over servers.ResetState, with
// schemas/reset_server_state.py's schema, its policy and its 202.

// schemaResetState is reset_server_state.reset_state.
var schemaResetState = schema{kType{"object"},
	kProperties{{"os-resetState", schema{kType{"object"},
		kProperties{{"state", schema{kType{"string"}, kEnum{"active", "error"}}}},
		kRequired{"state"}, kNoAdditional{props: []string{"state"}}}}},
	kRequired{"os-resetState"}, kNoAdditional{props: []string{"os-resetState"}}}

// resetServerState is _reset_state: 202 with no body.
func (a *API) resetServerState(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:os-admin-actions:reset_state"))
	if err != nil {
		return 0, nil, err
	}
	inner, _ := c.body.(obj).get("os-resetState")
	state, _ := inner.(obj).get("state")
	err = a.servers.ResetState(c.r.Context(), v.ID(), state.(string), c.requestID)
	var se *servers.StateError
	var inFlight *servers.MoveInFlightError
	switch {
	case err == nil:
		return http.StatusAccepted, nil, nil
	case errors.Is(err, servers.ErrNotFound):
		return 0, nil, instanceNotFound(v.ID())
	case errors.As(err, &se):
		return 0, nil, errConflict(se.Error())
	case errors.As(err, &inFlight):
		return 0, nil, errConflict(inFlight.Error() + "; confirm, revert or abort it first")
	case errors.Is(err, servers.ErrKeptChanging):
		return 0, nil, errConflict(fmt.Sprintf("Instance %s changed during the request; try again.", v.ID()))
	}
	return 0, nil, err
}
