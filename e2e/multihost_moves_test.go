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

// Scenario 6: cold moves across the deployment: a server on each host of
// cell1 and cell2 cold-migrated through the Nova API, each move's
// destination chosen in its own cell by whichever scheduler leads; a
// third reverted, the rest confirmed. While they wait in
// VERIFY_RESIZE the move invariants hold with the moves in flight
// (source under the migration's consumer, destination under the
// instance); once settled the multi-host invariants, the moves' among
// them, hold at rest.
func scenarioColdMoves(t *testing.T, c *mhCluster) {
	// One server on each host of cell1 and cell2 (compute-1..6): cell3,
	// when scenario 5 ran, has a host that fails every move's prep, and
	// a server on its other host would have nowhere to go.
	ids, errs := c.burstEach("movers", 6, 6, func(i int) ([]string, []error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.alternate()(i).CreateServers(ctx, api.CreateRequest{
			Name: fmt.Sprintf("movers-%d", i), Flavor: "m1.tiny", Count: 1, Host: fmt.Sprintf("compute-%d", i+1)})
		if err != nil {
			return nil, []error{err}
		}
		return serverIDs(resp), nil
	})
	if len(errs) > 0 {
		t.Fatalf("burst refused: %v", errs)
	}
	byID := c.settleAll(time.Minute)
	movers := ids
	source := map[string]string{}
	for _, id := range ids {
		v := byID[id]
		var i int
		if _, err := fmt.Sscanf(v.Name, "movers-%d", &i); err != nil || v.Status != "ACTIVE" || v.Host != fmt.Sprintf("compute-%d", i+1) {
			t.Fatalf("mover %s (%s): %s on %s, want ACTIVE on the host it named", id, v.Name, v.Status, v.Host)
		}
		source[id] = v.Host
	}
	// Cold migrations: a resize up would be refused by Nova's quota in
	// the deployment's project, whose bursts (through /v1) already use
	// more RAM than its default 50 GB.
	for _, id := range movers {
		c.serverAction(id, map[string]any{"migrate": nil}, http.StatusAccepted)
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
