package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestRequestIDFollowsACreate: a server create through the Nova API is
// audited once (who, what, how it ended), and the request id its answer
// carries is in the superconductor's hand-off line and the agent's
// "instance active" line: one grep of the id finds the whole story.
func TestRequestIDFollowsACreate(t *testing.T) {
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	var logs logtest.Buffer
	s := New(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug, JSONFormat: true}))
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Dev(DevOptions{Hosts: 1, Cells: 1, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	admin := api.NewClient(s.Endpoint("compute API")) // noauth2's admin, no token
	testwait.Poll(t, 30*time.Second, "the dev host up", func() (bool, string) {
		hosts, err := admin.ListHosts(ctx)
		return err == nil && len(hosts) == 1 && hosts[0].State == "up" && hosts[0].Resources["VCPU"].Capacity > 0,
			fmt.Sprint(hosts, err)
	})
	base := s.Endpoint("compute API") + "/v2.1"
	send := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Auth-Token", "alice:demo") // noauth2: user alice of project demo
		req.Header.Set("OpenStack-API-Version", "compute 2.74")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	var id string
	resp, body := send("POST", "/servers", `{"server": {"name": "traced", "flavorRef": "1", "imageRef": "`+
		images.DefaultID(images.DefaultFakeImage)+`", "networks": "none"}}`)
	var out struct{ Server struct{ ID string } }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	id = out.Server.ID
	rid := resp.Header.Get("X-OpenStack-Request-Id")
	if !strings.HasPrefix(rid, "req-") || resp.Header.Get("X-Compute-Request-Id") != rid {
		t.Fatalf("request ids %q and %q, want one req- id in both headers", rid, resp.Header.Get("X-Compute-Request-Id"))
	}
	testwait.Poll(t, 30*time.Second, "the server ACTIVE", func() (bool, string) {
		_, body := send("GET", "/servers/"+id, "")
		return strings.Contains(body, `"status": "ACTIVE"`), body
	})

	// Every line naming the request id, by message.
	seen := map[string][]map[string]any{}
	testwait.Poll(t, 10*time.Second, "the request id in the API's, the superconductor's and the agent's lines", func() (bool, string) {
		seen = map[string][]map[string]any{}
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == rid {
				msg, _ := m["@message"].(string)
				seen[msg] = append(seen[msg], m)
			}
		}
		return len(seen["audit"]) > 0 && len(seen["handed off"]) > 0 && len(seen["instance active"]) > 0,
			fmt.Sprintf("lines with %s: %v", rid, seen)
	})
	audits := seen["audit"]
	if len(audits) != 1 {
		t.Fatalf("%d audit lines for the create, want one: %v", len(audits), audits)
	}
	for k, want := range map[string]any{"api": "compute", "user": "alice", "project": "demo", "method": "POST",
		"path": "/v2.1/servers", "status": float64(202), "@module": "audit"} {
		if got := audits[0][k]; got != want {
			t.Errorf("audit line %s = %v, want %v: %v", k, got, want, audits[0])
		}
	}
	if got := seen["instance active"][0]["instance"]; got != id {
		t.Errorf("the agent's line names instance %v, want %s", got, id)
	}
}
