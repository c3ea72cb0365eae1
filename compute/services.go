package compute

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/berth-project/berth/hosts"
)

// Nova's os-services (nova/api/openstack/compute/services.py) over
// package hosts. Berth lists a nova-compute for every host whose agent
// registered, and a nova-scheduler and a nova-conductor for every running
// scheduler and superconductor (hosts.Controls); only nova-compute
// services can be changed or deleted, as in Nova.

const mvServiceUUIDs = 53 // UUID_FOR_ID_MIN_VERSION

func (a *API) listServices(c *reqCtx) (int, any, error) {
	q := queryObj(c.r.URL.RawQuery)
	s := schemaServicesQuery
	if c.v.atLeast(75) {
		s = schemaServicesQuery2_75
	}
	if e := s.check(q, nil); e != nil {
		return 0, nil, errBadRequest(e.queryError())
	}
	snap, err := a.readServices(c.r.Context(), false)
	if err != nil {
		return 0, nil, err
	}
	host, _ := param(q, "host")
	binary, _ := param(q, "binary")
	out := []obj{}
	for _, s := range snap.services {
		if (host != "" && s.host != host) || (binary != "" && s.binary != binary) {
			continue
		}
		out = append(out, serviceView(c, s))
	}
	return http.StatusOK, obj{{"services", out}}, nil
}

// serviceView is _get_service_detail, forced_down included from 2.11.
func serviceView(c *reqCtx, s *serviceRecord) obj {
	var id any = s.id
	if c.v.atLeast(mvServiceUUIDs) {
		id = s.uuid
	}
	status, state := "enabled", "down"
	if s.disabled {
		status = "disabled"
	}
	if s.up {
		state = "up"
	}
	o := obj{{"binary", s.binary}, {"host", s.host}, {"id", id}, {"zone", s.zone}, {"status", status},
		{"state", state}, {"updated_at", pyTime(s.updated)}, {"disabled_reason", orNull(s.reason)}}
	if c.v.atLeast(11) {
		o = append(o, member{"forced_down", s.forcedDown})
	}
	return o
}

// updateService is both of Nova's update methods: before 2.53 the id is
// an action (enable, disable, disable-log-reason, force-down from 2.11)
// and the body names host and binary; from 2.53 the id is the service's
// uuid and the body its new status and forced_down.
func (a *API) updateService(c *reqCtx) (int, any, error) {
	if c.v.atLeast(mvServiceUUIDs) {
		return a.updateServiceByID(c)
	}
	body := c.body.(obj)
	host, _ := body.get("host")
	binary, _ := body.get("binary")
	h, b := host.(string), binary.(string)
	var (
		ch  hosts.Change
		out obj
	)
	switch c.vars["id"] {
	case "enable":
		ch.Disabled = new(bool)
		out = obj{{"host", h}, {"binary", b}, {"status", "enabled"}}
	case "disable", "disable-log-reason":
		ch.Disabled = ptrTo(true)
		out = obj{{"host", h}, {"binary", b}, {"status", "disabled"}}
		if c.vars["id"] == "disable-log-reason" {
			r, ok := body.get("disabled_reason")
			if !ok {
				return 0, nil, errBadRequest("Missing disabled reason field")
			}
			reason := r.(string)
			ch.DisabledReason = &reason
			out = append(out, member{"disabled_reason", reason})
		}
	case "force-down":
		if !c.v.atLeast(11) {
			return 0, nil, errNotFound("Unknown action")
		}
		fd, ok := body.get("forced_down")
		if !ok {
			return 0, nil, errBadRequest("Missing forced_down field")
		}
		ch.ForcedDown = ptrTo(pyTrue(fd))
		out = obj{{"host", h}, {"binary", b}, {"forced_down", *ch.ForcedDown}}
	default:
		return 0, nil, errNotFound("Unknown action")
	}
	if b != "nova-compute" {
		return 0, nil, errBadRequest(notComputeMessage(b))
	}
	if _, err := a.changeHost(c, h, ch); err != nil {
		if errors.Is(err, hosts.ErrNotFound) {
			return 0, nil, errNotFound(fmt.Sprintf("Host '%s' is not mapped to any cell", h))
		}
		return 0, nil, err
	}
	return http.StatusOK, obj{{"service", out}}, nil
}

func notComputeMessage(binary string) string {
	return "Updating a " + binary + " service is not supported. Only nova-compute services can be updated."
}

func ptrTo[T any](v T) *T { return &v }

// changeHost records ch and, for a status change of an up host, waits for
// its agent to confirm COMPUTE_STATUS_DISABLED, as /v1 does; Nova's
// answer has no place for a wait that timed out, so that is logged (the
// agent's periodic provider sync sets the trait later).
func (a *API) changeHost(c *reqCtx, host string, ch hosts.Change) (*hosts.Updated, error) {
	res, err := a.hosts.Update(c.r.Context(), host, ch, a.traitWait)
	if err != nil {
		if errors.Is(err, hosts.ErrKeptChanging) {
			return nil, errConflict(fmt.Sprintf("Service of host %s kept changing; try again.", host))
		}
		return nil, err
	}
	if res.Unconfirmed != nil {
		a.log.Warn("service change recorded, but the agent did not confirm the disabled trait",
			"host", host, "error", res.Unconfirmed)
	}
	return res, nil
}

// findService is service_get_by_id: by uuid from 2.53, by integer id
// before; nil when there is none.
func (a *API) findService(c *reqCtx, id string) (*serviceRecord, error) {
	snap, err := a.readServices(c.r.Context(), false)
	if err != nil {
		return nil, err
	}
	for _, s := range snap.services {
		if sameID(serviceID(c, s), id) {
			return s, nil
		}
	}
	return nil, nil
}

func normalizeUUID(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '{' || ch == '}' || ch == '-':
			continue
		case ch >= 'A' && ch <= 'Z':
			ch += 'a' - 'A'
		}
		out = append(out, ch)
	}
	if strings := string(out); len(strings) == 41 && strings[:9] == "urn:uuid:" {
		out = out[9:]
	}
	if len(out) != 32 {
		return ""
	}
	return string(out[:8]) + "-" + string(out[8:12]) + "-" + string(out[12:16]) + "-" + string(out[16:20]) + "-" + string(out[20:])
}

// updateServiceByID is the 2.53 update.
func (a *API) updateServiceByID(c *reqCtx) (int, any, error) {
	id := c.vars["id"]
	if !isUUIDLike(id) {
		return 0, nil, errBadRequest("Invalid uuid " + id)
	}
	s, err := a.findService(c, id)
	if err != nil {
		return 0, nil, err
	}
	if s == nil {
		return 0, nil, errNotFound("Service " + id + " could not be found.")
	}
	if s.binary != "nova-compute" {
		return 0, nil, errBadRequest(notComputeMessage(s.binary))
	}
	body := c.body.(obj)
	var ch hosts.Change
	if st, ok := body.get("status"); ok {
		reason, hasReason := body.get("disabled_reason")
		if st == "enabled" {
			if hasReason && reason != "" {
				return 0, nil, errBadRequest("Specifying 'disabled_reason' with status 'enabled' is invalid.")
			}
			ch.Disabled = new(bool)
		} else {
			ch.Disabled = ptrTo(true)
			if hasReason {
				ch.DisabledReason = ptrTo(reason.(string))
			}
		}
	}
	if fd, ok := body.get("forced_down"); ok {
		ch.ForcedDown = ptrTo(pyTrue(fd))
	}
	if ch.Disabled == nil && ch.ForcedDown == nil {
		return 0, nil, errBadRequest("No updates were requested. Fields 'status' or 'forced_down' should be specified.")
	}
	res, err := a.changeHost(c, s.host, ch)
	if errors.Is(err, hosts.ErrNotFound) {
		return 0, nil, errNotFound("Service " + id + " could not be found.")
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, obj{{"service", serviceView(c, computeRecord(res.Host, s.zone))}}, nil
}

// deleteService is ServiceController.delete: a nova-compute is
// decommissioned (hosts.Decommission), refused while it hosts instances.
// Berth's control services are registrations of running processes, not
// records an operator could delete: that is refused too.
func (a *API) deleteService(c *reqCtx) (int, any, error) {
	id := c.vars["id"]
	if c.v.atLeast(mvServiceUUIDs) {
		if !isUUIDLike(id) {
			return 0, nil, errBadRequest("Invalid uuid " + id)
		}
	} else if _, ok := pyInt(id); !ok {
		return 0, nil, errBadRequest("Invalid input received: id must be an integer")
	}
	s, err := a.findService(c, id)
	if err != nil {
		return 0, nil, err
	}
	if s == nil {
		return 0, nil, errNotFound("Service " + id + " not found.")
	}
	if s.binary != "nova-compute" {
		return 0, nil, errConflict(fmt.Sprintf("The %s service on %s is the registration of a running Berth process; stop the process to remove it.", s.binary, s.host))
	}
	err = a.hosts.Decommission(c.r.Context(), s.host)
	switch {
	case errors.Is(err, hosts.ErrHasInstances):
		return 0, nil, errConflict("Unable to delete compute service that is hosting instances. Migrate or delete the instances first.")
	case errors.Is(err, hosts.ErrNotFound):
		return 0, nil, errNotFound("Service " + id + " not found.")
	case errors.Is(err, hosts.ErrKeptChanging):
		return 0, nil, errConflict(fmt.Sprintf("Service of host %s kept changing; try again.", s.host))
	case err != nil:
		return 0, nil, err
	}
	a.log.Info("compute service deleted", "host", s.host, "id", id)
	return http.StatusNoContent, nil, nil
}
