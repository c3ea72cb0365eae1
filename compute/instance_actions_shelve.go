package compute

import (
	"slices"
)

// The instance actions of shelving, recorded on the instance
// (etcdschema.ServerAction) as their steps end: "shelve"
// (compute_shelve_instance), "shelveOffload"
// (compute_shelve_offload_instance; also the leader's periodic offload,
// under a request id of its own) and "unshelve" (schedule_instances and
// compute_unshelve_instance for an offloaded server, one a host tried;
// compute_start_instance for a shelved one). Nova's shelve of an
// image-backed server also reports snapshot events and an unshelve
// get_image_info; Berth takes no snapshot and reads no image.

// shelveActions derives a shelved (or once shelved) server's actions,
// newest first: its create as it was when it was ACTIVE before the
// first shelve (a server is shelved only once built), the shelve
// actions, and its delete.
func shelveActions(s *serverState) []instanceAction {
	first := s.shelveActions[0]
	built := *s
	built.shelveActions, built.deleteRequestID = nil, ""
	built.vmState, built.status, built.fault, built.updated = vmActive, "ACTIVE", nil, first.Start
	if len(first.Events) > 0 && first.Events[0].Host != "" {
		built.host = first.Events[0].Host
	}
	if built.host == "" {
		built.host = "unknown" // offloaded before Berth recorded hosts on events: never, but never empty
	}
	acts := instanceActions(&built)
	for _, a := range s.shelveActions {
		act := instanceAction{action: a.Action, requestID: a.RequestID, start: a.Start}
		for _, e := range a.Events {
			finish := e.Finish
			ev := actionEvent{name: e.Event, start: e.Start, finish: &finish, result: e.Result, host: e.Host}
			if e.Result == "Error" {
				ev.traceback, ev.details = e.Reason, e.Reason
				act.message = "Error"
			}
			act.events = append(act.events, ev)
		}
		// Nova lists an action's events newest first.
		slices.SortStableFunc(act.events, func(x, y actionEvent) int { return y.start.Compare(x.start) })
		acts = append(acts, act)
	}
	if s.deleteRequestID != "" {
		acts = append(acts, instanceAction{action: "delete", requestID: s.deleteRequestID, start: s.updated,
			events: []actionEvent{{name: "compute_terminate_instance", start: s.updated, host: s.host}}})
	}
	slices.SortStableFunc(acts, func(x, y instanceAction) int { return y.start.Compare(x.start) })
	return acts
}
