package compute

import (
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// A confirm the scheduler leader made when resize_confirm_window ran out
// is shown as Nova's periodic task records it: no user, no project; a
// confirm the owner asked for keeps theirs.
func TestConfirmResizeActionUser(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &serverState{id: "srv", userID: "alice", projectID: "p1"}
	for _, tc := range []struct {
		desc          string
		auto          bool
		user, project any
	}{
		{"asked by the owner", false, "alice", "p1"},
		{"confirmed automatically", true, nil, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m := servers.MigrationRecord{Migration: etcdschema.Migration{UUID: "m", MigrationType: etcdschema.MigrationTypeResize,
				RequestID: "req-resize", ConfirmRequestID: "req-confirm", ConfirmedAt: &at, AutoConfirmed: tc.auto,
				CreatedAt: at.Add(-time.Hour)}}
			var confirm *instanceAction
			acts := moveActions([]servers.MigrationRecord{m})
			for i := range acts {
				if acts[i].action == "confirmResize" {
					confirm = &acts[i]
				}
			}
			if confirm == nil {
				t.Fatalf("no confirmResize action in %+v", acts)
			}
			o := actionView(&reqCtx{v: version{minor: 58}}, s, confirm)
			user, _ := o.get("user_id")
			project, _ := o.get("project_id")
			if user != tc.user || project != tc.project {
				t.Errorf("user_id, project_id = %v, %v; want %v, %v", user, project, tc.user, tc.project)
			}
			if rid, _ := o.get("request_id"); rid != "req-confirm" {
				t.Errorf("request_id = %v", rid)
			}
		})
	}
}
