package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// stringList accepts a JSON list of strings or a single string, as Nova's
// same_host and different_host hints do.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a server uuid or a list of them: %w", err)
	}
	*l = many
	return nil
}

// rawHints is the scheduler_hints body.
type rawHints struct {
	SameHost      stringList `json:"same_host"`
	DifferentHost stringList `json:"different_host"`
	Group         string     `json:"group"`
}

func (h *rawHints) hints() etcdschema.SchedulerHints {
	return etcdschema.SchedulerHints{SameHost: h.SameHost, DifferentHost: h.DifferentHost, Group: h.Group}
}

// checkPlacementRequest words servers.Store.CheckPlacement's errors as
// /v1 answers them: the message and status for the caller, or "" when
// the request is fine.
func (s *Server) checkPlacementRequest(ctx context.Context, az string, h etcdschema.SchedulerHints) (string, int) {
	err := s.servers.CheckPlacement(ctx, az, h)
	var zone *servers.ZoneError
	var group *servers.GroupError
	var hint *servers.HintError
	switch {
	case err == nil:
		return "", 0
	case errors.As(err, &hint):
		return fmt.Sprintf("Invalid input: scheduler hint '%s' must be a server group or server uuid, not %q.", hint.Hint, hint.Value),
			http.StatusBadRequest
	case errors.As(err, &zone):
		return fmt.Sprintf("Invalid input: the requested availability zone %q is not available (zones: %s).",
			az, strings.Join(zone.Zones, ", ")), http.StatusBadRequest
	case errors.As(err, &group):
		return fmt.Sprintf("Invalid input: server group %s (scheduler hint 'group') could not be found.", h.Group),
			http.StatusBadRequest
	}
	s.log.Error("check a create's zone and group", "error", err)
	return "The state store could not be read; try again.", http.StatusServiceUnavailable
}

// checkRequestedHost words servers.Store.CheckRequestedHost's errors as
// /v1 answers them.
func (s *Server) checkRequestedHost(ctx context.Context, host, node string) (string, int) {
	err := s.servers.CheckRequestedHost(ctx, host, node)
	var he *servers.HostError
	switch {
	case err == nil:
		return "", 0
	case errors.As(err, &he) && he.Mismatch:
		return fmt.Sprintf("Compute host %s has no node %s.", host, node), http.StatusBadRequest
	case errors.As(err, &he) && host != "":
		return fmt.Sprintf("Compute host %s could not be found.", host), http.StatusBadRequest
	case errors.As(err, &he):
		return fmt.Sprintf("Hypervisor hostname %s could not be found.", node), http.StatusBadRequest
	}
	return err.Error(), http.StatusServiceUnavailable
}
