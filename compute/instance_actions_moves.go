package compute

import (
	"slices"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// The instance actions of the cold moves, derived from the server's
// Migration records as Nova 26 shows them (testdata/nova_moves.json):
// "resize" or "migrate" (conductor_migrate_server, compute_prep_resize,
// compute_resize_instance, compute_finish_resize), "confirmResize"
// (compute_confirm_resize) and "revertResize" (compute_revert_resize,
// compute_finish_revert_resize), each event once its step is done,
// newest first. Nova also shows a cold_migrate event beside
// conductor_migrate_server and an event in progress with no finish;
// Berth records a step when it ends.

// moveActionOf names which action each event belongs to.
var moveActionOf = map[string]string{
	etcdschema.EventScheduleMove: "", "compute_prep_resize": "", "compute_resize_instance": "",
	"compute_finish_resize": "", "compute_confirm_resize": "confirmResize",
	"compute_revert_resize": "revertResize", "compute_finish_revert_resize": "revertResize",
	// An evacuation's: conductor rebuild_server, compute_rebuild_instance.
	etcdschema.EventEvacuateSchedule: "", etcdschema.EventEvacuateRebuild: "",
}

// moveActions are the actions of the server's migrations.
func moveActions(migs []servers.MigrationRecord) []instanceAction {
	var out []instanceAction
	for _, m := range migs {
		main := instanceAction{action: "migrate", requestID: m.RequestID, start: m.CreatedAt}
		switch m.MigrationType {
		case etcdschema.MigrationTypeResize:
			main.action = "resize"
		case etcdschema.MigrationTypeLiveMigration:
			main.action = "live-migration" // instance_actions.LIVE_MIGRATION
		case etcdschema.MigrationTypeEvacuation:
			main.action = "evacuate"
		}
		byName := map[string]*instanceAction{"": &main}
		if m.ConfirmRequestID != "" && m.ConfirmedAt != nil {
			byName["confirmResize"] = &instanceAction{action: "confirmResize", requestID: m.ConfirmRequestID,
				start: *m.ConfirmedAt, bySystem: m.AutoConfirmed}
		}
		if m.RevertRequestID != "" && m.RevertedAt != nil {
			byName["revertResize"] = &instanceAction{action: "revertResize", requestID: m.RevertRequestID, start: *m.RevertedAt}
		}
		for _, e := range m.Events {
			act, ok := byName[moveActionOf[e.Event]]
			if !ok {
				continue
			}
			finish := e.Finish
			ev := actionEvent{name: e.Event, start: e.Start, finish: &finish, result: e.Result, host: e.Host}
			if e.Result == "Error" {
				ev.traceback, ev.details = e.Reason, e.Reason
				act.message = "Error"
			}
			act.events = append(act.events, ev)
		}
		for _, name := range []string{"", "confirmResize", "revertResize"} {
			if act, ok := byName[name]; ok {
				// Nova lists an action's events newest first.
				slices.SortStableFunc(act.events, func(x, y actionEvent) int { return y.start.Compare(x.start) })
				out = append(out, *act)
			}
		}
	}
	return out
}

// withMoveActions adds the move actions to a server's others, newest
// first as Nova lists them.
func withMoveActions(acts []instanceAction, migs []servers.MigrationRecord) []instanceAction {
	if len(migs) == 0 {
		return acts
	}
	// The create's build ran on the first move's source and had ended
	// before it: the server's current host and last change are a move's.
	first := migs[0]
	for i := range acts {
		if acts[i].action != "create" || len(acts[i].events) == 0 {
			continue
		}
		ev := &acts[i].events[len(acts[i].events)-1]
		if ev.name == "compute__do_build_and_run_instance" && ev.result != "Error" {
			end := first.CreatedAt
			if ev.finish != nil && ev.finish.Before(end) {
				end = *ev.finish
			}
			ev.host, ev.finish, ev.result = first.SourceHost, &end, "Success"
		}
	}
	acts = append(acts, moveActions(migs)...)
	slices.SortStableFunc(acts, func(x, y instanceAction) int { return y.start.Compare(x.start) })
	return acts
}
