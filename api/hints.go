package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
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

// checkPlacementRequest validates what a create asks of the scheduler: the
// zone must exist (the default one or an aggregate's, as Nova's API
// checks) and a group hint must name a group. It returns a message and
// status for the caller, or "" when the request is fine.
func (s *Server) checkPlacementRequest(ctx context.Context, az string, h etcdschema.SchedulerHints) (string, int) {
	if az != "" {
		zones, err := s.availabilityZones(ctx)
		if err != nil {
			s.log.Error("read availability zones", "error", err)
			return "The state store could not be read; try again.", http.StatusServiceUnavailable
		}
		if !zones[az] {
			names := make([]string, 0, len(zones))
			for z := range zones {
				names = append(names, z)
			}
			sort.Strings(names)
			return fmt.Sprintf("Invalid input: the requested availability zone %q is not available (zones: %s).",
				az, strings.Join(names, ", ")), http.StatusBadRequest
		}
	}
	if h.Group != "" {
		resp, err := s.cli.Get(ctx, s.keys.ServerGroup(h.Group), clientv3.WithCountOnly())
		if err != nil {
			s.log.Error("read server group", "group", h.Group, "error", err)
			return "The state store could not be read; try again.", http.StatusServiceUnavailable
		}
		if resp.Count == 0 {
			return fmt.Sprintf("Invalid input: server group %s (scheduler hint 'group') could not be found.", h.Group),
				http.StatusBadRequest
		}
	}
	return "", 0
}
