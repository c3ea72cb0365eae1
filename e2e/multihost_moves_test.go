package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/testwait"
)

// Scenario 6: cold moves across the deployment: servers resized and
// cold-migrated through the Nova API of either server process, each
// move's destination chosen in its own cell by whichever scheduler
// leads; half confirmed, half reverted. While they wait in
// VERIFY_RESIZE the move invariants hold with the moves in flight
// (source under the migration's consumer, destination under the
// instance); once settled the multi-host invariants, the moves' among
// them, hold at rest.
func scenarioColdMoves(t *testing.T, c *mhCluster) {
	ids, errs := c.burst("movers", 8, c.alternate())
	if len(errs) > 0 {
		t.Fatalf("burst refused: %v", errs)
	}
	byID := c.settleAll(time.Minute)
	var movers []string
	source := map[string]string{}
	// Only servers of cell1 and cell2 (compute-1..6): cell3, when
	// scenario 5 ran, has a host that fails every move's prep, and a
	// server on its other host would have nowhere to go.
	firstCells := map[string]bool{}
	for i := 1; i <= 6; i++ {
		firstCells[fmt.Sprintf("compute-%d", i)] = true
	}
	for _, id := range ids {
		if byID[id].Status == "ACTIVE" && firstCells[byID[id].Host] {
			movers = append(movers, id)
			source[id] = byID[id].Host
		}
	}
	if len(movers) < 4 {
		t.Fatalf("only %d of the movers ACTIVE: %v", len(movers), byID)
	}
	for i, id := range movers {
		body := map[string]any{"migrate": nil}
		if i%2 == 0 {
			body = map[string]any{"resize": map[string]any{"flavorRef": "2"}}
		}
		c.serverAction(id, body, http.StatusAccepted)
	}
	for _, id := range movers {
		v := c.waitServer(id, "VERIFY_RESIZE")
		if v.Host == source[id] {
			t.Errorf("server %s moved onto its own host %s", id, v.Host)
		}
	}
	checkMovesOn(t, c.cli, c.keys, "cold moves in VERIFY_RESIZE", false, "")
	for i, id := range movers {
		if i%3 == 0 {
			c.serverAction(id, map[string]any{"revertResize": nil}, http.StatusAccepted)
		} else {
			c.serverAction(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
		}
	}
	for i, id := range movers {
		v := c.waitServer(id, "ACTIVE")
		if back := i%3 == 0; back != (v.Host == source[id]) {
			t.Errorf("server %s ACTIVE on %s (source %s) after a %s", id, v.Host, source[id], map[bool]string{true: "revert", false: "confirm"}[back])
		}
	}
	c.checkInvariants("cold_moves")
}

// serverAction posts a Nova server action to a running server's API as
// the admin and wants code back.
func (c *mhCluster) serverAction(id string, body any, code int) {
	c.t.Helper()
	cl := c.api()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, cl.BaseURL+"/v2.1/servers/"+id+"/action", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", cl.Token)
	req.Header.Set("X-OpenStack-Nova-API-Version", "latest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		c.t.Fatalf("%v on %s: %v", body, id, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		c.t.Fatalf("%v on %s: %s %s, want %d", body, id, resp.Status, out, code)
	}
}

// waitServer waits until server id is status with no task.
func (c *mhCluster) waitServer(id, status string) *api.ServerView {
	c.t.Helper()
	var v *api.ServerView
	testwait.Poll(c.t, time.Minute, id+" "+status, func() (bool, string) {
		var err error
		v, err = c.api().GetServer(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		if v.Status == "ERROR" {
			c.t.Fatalf("server %s went ERROR: %+v", id, v.Fault)
		}
		return v.Status == status && v.TaskState == "", fmt.Sprintf("%s/%s on %s", v.Status, v.TaskState, v.Host)
	})
	return v
}
