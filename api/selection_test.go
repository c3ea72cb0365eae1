package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-project/berth/etcdschema"
)

// /v1/servers/{id}/selection keeps its JSON (berth selection show reads
// it) now that servers.Store.SelectionOf reads the records.
func TestShowSelectionJSON(t *testing.T) {
	srv, keys, cli := newAPIWithClient(t)
	ctx := context.Background()
	id := uuid.NewString()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for key, v := range map[string]etcdschema.Versioned{
		keys.InstanceMapping(id): &etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1", ProjectID: "p"},
		keys.CellInstance("cell1", id): &etcdschema.Instance{UUID: id, Name: "a", Cell: "cell1", Status: etcdschema.StatusBuild,
			Attempts: 2, ProjectID: "p"},
		keys.Alternates(id): &etcdschema.Alternates{InstanceUUID: id, Cell: "cell1", MaxAttempts: 3,
			Attempts:  []etcdschema.Attempt{{Host: "h1", Reason: "disk full", At: at}},
			Remaining: []etcdschema.Selection{{ServiceHost: "h2", Nodename: "n2", Cell: "cell1"}}},
	} {
		if _, err := cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	code, out := do(t, http.MethodGet, srv.URL+"/v1/servers/"+id+"/selection", "")
	if code != http.StatusOK {
		t.Fatalf("GET selection: %d %v", code, out)
	}
	got, _ := json.Marshal(out["selection"])
	want := `{"alternates":[{"cell":"cell1","host":"h2","node":"n2"}],"attempts":[{"at":"2026-11-26T12:00:00Z","host":"h1","reason":"disk full"}],` +
		`"attempts_made":2,"cell":"cell1","instance":"` + id + `","kept":true,"max_attempts":3,"status":"BUILD"}`
	if string(got) != want {
		t.Errorf("selection\n %s\nwant\n %s", got, want)
	}
	if code, out := do(t, http.MethodGet, srv.URL+"/v1/servers/"+uuid.NewString()+"/selection", ""); code != http.StatusNotFound {
		t.Errorf("unknown server: %d %v, want 404", code, out)
	}
}
