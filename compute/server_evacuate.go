package compute

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/berth-project/berth/servers"
)

// The evacuate server action: evacuate.py EvacuateController._evacuate
// over servers.Evacuate. Its schemas, answers and refusals are Nova
// 26's: onSharedStorage required before 2.14 (and the password answered
// in the body), force from 2.29 until 2.68 dropped it. The answer is a
// 200, as Nova keeps it for backwards compatibility.

// Microversions that change evacuate.
const (
	mvEvacuateNoSharedStorage = 14 // no onSharedStorage, no adminPass in the answer
	mvEvacuateForce           = 29 // force
	mvEvacuateNoForce         = 68 // force gone again
)

// evacuateSchema is schemas/evacuate.py for version v.
func evacuateSchema(v version) schema {
	props := kProperties{{"host", fqdn}}
	var req []string
	if !v.atLeast(mvEvacuateNoSharedStorage) {
		props = append(props, prop{"onSharedStorage", booleanParam})
		req = append(req, "onSharedStorage")
	}
	props = append(props, prop{"adminPass", schema{kType{"string"}}})
	if v.atLeast(mvEvacuateForce) && !v.atLeast(mvEvacuateNoForce) {
		props = append(props, prop{"force", booleanParam})
	}
	return wrapped("evacuate", object(props, req...))
}

// evacuateServer is EvacuateController._evacuate.
func (a *API) evacuateServer(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:os-evacuate"))
	if err != nil {
		return 0, nil, err
	}
	inner, _ := c.body.(obj).get("evacuate")
	body := inner.(obj)
	host := ""
	if h, ok := body.get("host"); ok {
		host = h.(string)
	}
	force := false
	if c.v.atLeast(mvEvacuateForce) {
		if f, ok := body.get("force"); ok {
			force, _ = pyBoolValue(f)
			if force && host == "" {
				return 0, nil, errBadRequest("Can't force to a non-provided destination")
			}
		}
	}
	password, hasPassword := "", false
	if p, ok := body.get("adminPass"); ok {
		password, hasPassword = p.(string), true
	}
	if !c.v.atLeast(mvEvacuateNoSharedStorage) {
		shared, _ := body.get("onSharedStorage")
		onShared, _ := pyBoolValue(shared)
		if hasPassword && onShared {
			return 0, nil, errBadRequest("admin password can't be changed on existing disk")
		}
		if !hasPassword && !onShared {
			password = generatePassword()
		}
	}
	_, err = a.servers.Evacuate(c.r.Context(), v.ID(), servers.EvacuateRequest{Host: host, Force: force, RequestID: c.requestID})
	if err != nil {
		return 0, nil, evacuateFault(err, v.ID(), host)
	}
	if !c.v.atLeast(mvEvacuateNoSharedStorage) {
		// CONF.api.enable_instance_password (default True); Berth sets no
		// password, as Nova's fake driver does not.
		var pw any
		if password != "" {
			pw = password
		}
		return http.StatusOK, obj{{"adminPass", pw}}, nil
	}
	return http.StatusOK, nil, nil
}

// pyBoolValue is strutils.bool_from_string of a value the schema let
// through (parameter_types.boolean: a bool or one of its strings).
func pyBoolValue(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		return boolFromString(x)
	}
	return false, false
}

// evacuateFault words an evacuation's error as Nova's handler does.
func evacuateFault(err error, id, host string) error {
	var se *servers.StateError
	var he *servers.HostError
	var inUse *servers.ServiceInUseError
	var inFlight *servers.MoveInFlightError
	switch {
	case errors.As(err, &he) && host != "" && he.Host == host:
		return errNotFound("Compute host " + host + " not found.")
	case errors.As(err, &he):
		// The server's own host has no service (Nova's
		// ComputeHostNotFound from Service.get_by_compute_host).
		return errNotFound("Compute host " + he.Host + " could not be found.")
	case errors.Is(err, servers.ErrEvacuateSameHost):
		return errBadRequest("The target host can't be the same one.")
	case errors.As(err, &se):
		return errConflict(se.Error())
	case errors.As(err, &inFlight):
		return errConflict(inFlight.Error())
	case errors.As(err, &inUse):
		return errBadRequest(inUse.Error())
	case errors.Is(err, servers.ErrNotFound):
		return instanceNotFound(id)
	case errors.Is(err, servers.ErrKeptChanging):
		return errConflict(fmt.Sprintf("Instance %s changed during the request; try again.", id))
	}
	return err
}
