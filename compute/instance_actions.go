package compute

import (
	"net/http"
	"slices"
	"time"
)

// os-instance-actions: instance_actions.py over what Berth records of a
// server's builds. Berth keeps no action table: the actions are derived
// from the server's records, as doc.go's table says.
//
//   - "create", with the create's request id: a
//     "schedule_and_build_instances" event (the superconductor's
//     scheduling; an Error with the fault for a server buried in cell0),
//     then one "compute__do_build_and_run_instance" event a build
//     attempt, the failed ones an Error with the reason Berth recorded.
//   - "delete", once a delete was accepted for a server on a host, with
//     a "compute_terminate_instance" event while the host works it.
//
// Berth records when an attempt started, not when it ended: an event
// ends when the next one starts, the last when the server last changed.

// Microversions that change instance actions.
const (
	mvActionUpdatedAt   = 58 // updated_at
	mvActionEventsShown = 51 // events for non-admins (without traceback)
	mvActionEventHost   = 62 // host, hostId
	mvActionDetails     = 84 // details
)

type actionEvent struct {
	name          string
	start         time.Time
	finish        *time.Time
	result        any // "Success", "Error" or None
	traceback     any
	host, details string
}

type instanceAction struct {
	action, requestID string
	start             time.Time
	message           any
	events            []actionEvent
	// bySystem: Berth did it on its own (an automatic confirm), as
	// Nova's periodic tasks do under an admin context with no user or
	// project, so the action shows user_id and project_id null.
	bySystem bool
}

// perfectTime is oslo's PERFECT_TIME_FORMAT, as jsonutils writes a
// datetime.
func perfectTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000") }

func timeOrNull(t *time.Time) any {
	if t == nil {
		return nil
	}
	return perfectTime(*t)
}

// instanceActions derives a server's actions, newest first.
func instanceActions(s *serverState) []instanceAction {
	if len(s.shelveActions) > 0 {
		return shelveActions(s) // instance_actions_shelve.go
	}
	create := instanceAction{action: "create", requestID: s.requestID, start: s.created}
	sched := actionEvent{name: "schedule_and_build_instances", start: s.created}
	switch {
	case s.vmState == vmBuilding && s.host == "":
		// still a build request: scheduling
	case s.host == "" && s.fault != nil:
		end := s.fault.Created
		sched.finish, sched.result = &end, "Error"
		sched.traceback, sched.details = s.fault.Message+"\n"+s.fault.Details, s.fault.Message
	default:
		first := s.updated
		if len(s.attempts) > 0 {
			first = s.attempts[0].At
		}
		sched.finish, sched.result = &first, "Success"
	}
	create.events = append(create.events, sched)
	for i, at := range s.attempts {
		end := s.updated
		if i+1 < len(s.attempts) {
			end = s.attempts[i+1].At
		}
		create.events = append(create.events, actionEvent{name: "compute__do_build_and_run_instance", start: at.At,
			finish: &end, result: "Error", traceback: at.Reason, host: at.Host, details: at.Reason})
	}
	if s.host != "" {
		start := s.created
		if n := len(s.attempts); n > 0 {
			start = s.attempts[n-1].At
		}
		ev := actionEvent{name: "compute__do_build_and_run_instance", start: start, host: s.host}
		switch s.vmState {
		case vmActive:
			end := s.updated
			ev.finish, ev.result = &end, "Success"
		case vmError:
			end := s.updated
			ev.finish, ev.result = &end, "Error"
			if s.fault != nil {
				ev.traceback, ev.details = s.fault.Message+"\n"+s.fault.Details, s.fault.Message
			}
		}
		create.events = append(create.events, ev)
	}
	if s.vmState == vmError {
		create.message = "Error"
	}
	actions := []instanceAction{create}
	if s.deleteRequestID != "" {
		del := instanceAction{action: "delete", requestID: s.deleteRequestID, start: s.updated}
		del.events = []actionEvent{{name: "compute_terminate_instance", start: s.updated, host: s.host}}
		actions = append([]instanceAction{del}, actions...)
	}
	return actions
}

// updatedAt is the action's updated_at: its last event's change.
func (act *instanceAction) updatedAt() time.Time {
	t := act.start
	for _, e := range act.events {
		if e.start.After(t) {
			t = e.start
		}
		if e.finish != nil && e.finish.After(t) {
			t = *e.finish
		}
	}
	return t
}

func actionView(c *reqCtx, s *serverState, act *instanceAction) obj {
	var user, project any = s.userID, s.projectID
	if act.bySystem {
		user, project = nil, nil
	}
	o := obj{{"action", act.action}, {"instance_uuid", s.id}, {"request_id", act.requestID},
		{"user_id", user}, {"project_id", project}, {"start_time", perfectTime(act.start)},
		{"message", act.message}}
	if c.v.atLeast(mvActionUpdatedAt) {
		o = append(o, member{"updated_at", perfectTime(act.updatedAt())})
	}
	return o
}

// instanceActionsQuery is list_query_params_v258 (v266 from 2.66).
func instanceActionsQuery(v version) schema {
	single := func(s schema) schema { return schema{kType{"array"}, kItems{s}, kMaxItems(1)} }
	dateTime := single(schema{kType{"string"}, kFormat("date-time")})
	props := kProperties{
		{"limit", single(schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`), kMinimum{limit: 0, text: "0"}, kMinLength(1)})},
		{"marker", single(schema{kType{"string"}})},
		{"changes-since", dateTime},
	}
	if v.atLeast(mvChangesBefore) {
		props = append(props, prop{"changes-before", dateTime})
	}
	return schema{kType{"object"}, props, noAdditional(props)}
}

// listInstanceActions is InstanceActionsController.index: from 2.58
// with updated_at, paging by request id and the changes-since/before
// window on updated_at.
func (a *API) listInstanceActions(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectReaderOrAdmin("os_compute_api:os-instance-actions:list"))
	if err != nil {
		return 0, nil, err
	}
	s := stateOf(v)
	migs, err := a.servers.InstanceMigrations(c.r.Context(), s.cell, s.id)
	if err != nil {
		return 0, nil, err
	}
	acts := withMoveActions(instanceActions(s), migs)
	limit := maxLimit
	paged := c.v.atLeast(mvActionUpdatedAt)
	if paged {
		q := queryObj(c.r.URL.RawQuery)
		if e := instanceActionsQuery(c.v).check(q, nil); e != nil {
			return 0, nil, errBadRequest(e.queryError())
		}
		var since, before *time.Time
		if v, ok := param(q, "changes-since"); ok {
			t, _ := parseISOTime(v)
			since = &t
		}
		if v, ok := param(q, "changes-before"); ok {
			t, _ := parseISOTime(v)
			if since != nil && t.Before(*since) {
				return 0, nil, errBadRequest("The value of changes-since must be less than or equal to changes-before.")
			}
			before = &t
		}
		if v, ok := param(q, "limit"); ok {
			if n, ok := pyInt(v); ok && n.IsInt64() && n.Int64() < maxLimit {
				limit = int(n.Int64())
			}
		}
		acts = slices.DeleteFunc(acts, func(act instanceAction) bool {
			u := act.updatedAt()
			return since != nil && u.Before(*since) || before != nil && u.After(*before)
		})
		if m, ok := param(q, "marker"); ok {
			i := slices.IndexFunc(acts, func(act instanceAction) bool { return act.requestID == m })
			if i < 0 {
				// db.actions_get names the marker after its lookup failed.
				return 0, nil, errBadRequest("Marker None could not be found.")
			}
			acts = acts[i+1:]
		}
		if len(acts) > limit {
			acts = acts[:limit]
		}
	}
	out := make([]obj, len(acts))
	for i := range acts {
		out[i] = actionView(c, s, &acts[i])
	}
	body := obj{{"instanceActions", out}}
	if paged && len(acts) > 0 {
		coll := "servers/" + c.vars["server_id"] + "/os-instance-actions"
		if links := pageLinks(c, acts[len(acts)-1].requestID, len(acts), limit, coll); links != nil {
			body = append(body, member{"links", links})
		}
	}
	return http.StatusOK, body, nil
}

// showInstanceAction is InstanceActionsController.show: the events with
// their tracebacks for admins (os-instance-actions:events), without
// them from 2.51 for others; host and hostId from 2.62, details from
// 2.84.
func (a *API) showInstanceAction(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, projectReaderOrAdmin("os_compute_api:os-instance-actions:show"))
	if err != nil {
		return 0, nil, err
	}
	s := stateOf(v)
	migs, err := a.servers.InstanceMigrations(c.r.Context(), s.cell, s.id)
	if err != nil {
		return 0, nil, err
	}
	acts := withMoveActions(instanceActions(s), migs)
	i := slices.IndexFunc(acts, func(act instanceAction) bool { return act.requestID == c.vars["id"] })
	if i < 0 {
		return 0, nil, errNotFound("Action " + c.vars["id"] + " not found")
	}
	act := &acts[i]
	o := actionView(c, s, act)
	admin := c.can(adminOnly("os_compute_api:os-instance-actions:events"), s.projectID) == nil
	showEvents, showTraceback, showHost := admin, admin, admin && c.v.atLeast(mvActionEventHost)
	if !admin && c.v.atLeast(mvActionEventsShown) {
		showEvents = true
	}
	if showEvents {
		showDetails := c.v.atLeast(mvActionDetails) &&
			c.can(adminOnly("os_compute_api:os-instance-actions:events:details"), s.projectID) == nil
		events := make([]obj, len(act.events))
		for j, e := range act.events {
			ev := obj{{"event", e.name}, {"start_time", perfectTime(e.start)}, {"finish_time", timeOrNull(e.finish)},
				{"result", e.result}}
			if showTraceback {
				ev = append(ev, member{"traceback", e.traceback})
			}
			if showHost {
				ev = append(ev, member{"host", e.host})
			}
			if c.v.atLeast(mvActionEventHost) {
				ev = append(ev, member{"hostId", hostID(e.host, s.projectID)})
			}
			if showDetails {
				ev = append(ev, member{"details", orNull(e.details)})
			}
			events[j] = ev
		}
		o = append(o, member{"events", events})
	}
	return http.StatusOK, obj{{"instanceAction", o}}, nil
}
