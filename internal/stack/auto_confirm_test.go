package stack

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
)

// TestResizeAutoConfirmed: with api { resize_confirm_window } set, a
// resize nobody confirms is confirmed by the scheduler leader once the
// window is over, as Nova's _poll_unconfirmed_resizes does: the server
// ends ACTIVE on its destination, the source's allocation is freed, and
// the confirmResize action has a request id of its own and no user.
func TestResizeAutoConfirmed(t *testing.T) {
	r := newMoveRigWith(t, 2, nil, func(cfg *configs.Config) {
		cfg.API.ResizeConfirmWindow = time.Second
		cfg.Scheduler.LeaderInterval = 100 * time.Millisecond
	})
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("auto", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-2" {
		t.Fatalf("ACTIVE on %s, want the destination compute-2", hostOf(srv))
	}
	mig := r.migration(id)
	if mig.Status != etcdschema.MigrationConfirmed || !mig.AutoConfirmed || mig.ConfirmedAt == nil {
		t.Fatalf("migration %s auto_confirmed=%v, want confirmed automatically", mig.Status, mig.AutoConfirmed)
	}
	if waited := mig.ConfirmedAt.Sub(mig.CreatedAt); waited < time.Second {
		t.Errorf("confirmed %s after the resize began, before its 1s window", waited)
	}
	r.checkUsages("the confirm freed the source", hosts, map[string]usage{"compute-2": flavorUsage(small)},
		map[string]map[string]usage{id: {"compute-2": flavorUsage(small)}, mig.UUID: nil})
	code, out := r.nova("GET", "/servers/"+id+"/os-instance-actions/"+mig.ConfirmRequestID, nil)
	if code != http.StatusOK {
		t.Fatalf("confirmResize action: %d %v", code, out)
	}
	act := out["instanceAction"].(map[string]any)
	if act["action"] != "confirmResize" || act["user_id"] != nil || act["project_id"] != nil ||
		!strings.HasPrefix(mig.ConfirmRequestID, "req-") || mig.ConfirmRequestID == mig.RequestID {
		t.Errorf("confirmResize action %v (request %s, resize's %s), want no user or project and its own request id",
			act, mig.ConfirmRequestID, mig.RequestID)
	}
}
