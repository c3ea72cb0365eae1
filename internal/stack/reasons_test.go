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

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// novaGet is a GET on the stack's Nova API (noauth: the anonymous caller
// is admin) at microversion mv, decoded into out.
func novaGet(t *testing.T, base, path, mv string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("OpenStack-API-Version", "compute "+mv)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// TestNoValidHostNamesTheResource boots 60 × m1.xlarge on 8 hosts that
// hold three each (memory runs out first, 8192 MB left on each), and a
// flavor over every host's VCPU max_unit, through the whole in-process
// stack: the faults, in /v1 and in Nova's server and instance action,
// name MEMORY_MB and max_unit, under Nova's head; a host disabled for
// maintenance is named with its reason.
func TestNoValidHostNamesTheResource(t *testing.T) {
	hosts := make([]string, 8)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("compute-%d", i+1)
	}
	s := startTestStackWith(t, etcdtest.Client(t), hosts, nil, func(cfg *configs.Config) {
		cfg.Agent.Inventory.VCPUs = 16
		cfg.Agent.Inventory.MemoryMB = 3*16384 + 8192
		cfg.Agent.Inventory.DiskGB = 2000
		cfg.Agent.Inventory.ReservedHostMemoryMB = 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := api.EnsureFlavors(ctx, s.Client(), s.Keys(), []etcdschema.Flavor{
		{ID: "32", Name: "wide", VCPUs: 32, RAMMB: 1024, DiskGB: 1}}); err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(s.endpoints["compute API"])
	nova := s.endpoints["compute API"]

	const memoryReason = "No valid host was found. Placed 24 of 60 instances, then 0 of 8 hosts fit: " +
		"8 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 8192 MB)."
	const maxUnitReason = "No valid host was found. 0 of 8 hosts fit: VCPU 32 exceeds max_unit 16 on every host."
	const disabledReason = "No valid host was found. 0 of 8 hosts fit: VCPU 32 exceeds max_unit 16 on 7 hosts; compute-8 is disabled: maintenance."
	for _, tc := range []struct {
		desc, flavor string
		count        int
		disable      string // a host to disable first, for maintenance
		want         string
	}{
		{"memory runs out", "m1.xlarge", 60, "", memoryReason},
		{"over max_unit", "wide", 1, "", maxUnitReason},
		{"a disabled host named with its reason", "wide", 1, "compute-8", disabledReason},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.disable != "" {
				status, reason := "disabled", "maintenance"
				if _, err := c.UpdateService(ctx, tc.disable, api.ServiceUpdate{Status: &status, DisabledReason: &reason}); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := c.CreateServers(ctx, api.CreateRequest{Name: tc.flavor, Flavor: tc.flavor, Count: tc.count})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Servers) != tc.count {
				t.Fatalf("created %d servers, want %d", len(resp.Servers), tc.count)
			}
			// Every server of the request is buried with the reason
			// (all or nothing, as Nova's multi-create).
			for _, srv := range resp.Servers {
				v := waitStatus(t, c, srv.ID)
				if v.Status != "ERROR" || v.Fault == nil || v.Fault.Message != tc.want {
					t.Fatalf("/v1 server %s: %s, fault %+v; want ERROR with %q", srv.Name, v.Status, v.Fault, tc.want)
				}
			}
			id := resp.Servers[0].ID
			var show struct {
				Server struct {
					Fault struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
						Details string `json:"details"`
					} `json:"fault"`
				} `json:"server"`
			}
			novaGet(t, nova, "/v2.1/servers/"+id, "2.84", &show)
			if f := show.Server.Fault; f.Code != 500 || f.Message != tc.want || !strings.Contains(f.Details, "ComputeFilter removed 0") {
				t.Errorf("Nova fault = %+v, want 500 with %q and the filters' counts in details", f, tc.want)
			}
			var list struct {
				Actions []struct {
					Action    string `json:"action"`
					RequestID string `json:"request_id"`
				} `json:"instanceActions"`
			}
			novaGet(t, nova, "/v2.1/servers/"+id+"/os-instance-actions", "2.84", &list)
			if len(list.Actions) != 1 || list.Actions[0].Action != "create" {
				t.Fatalf("instance actions = %+v, want one create", list.Actions)
			}
			var act struct {
				Action struct {
					Events []struct {
						Event   string `json:"event"`
						Result  string `json:"result"`
						Details string `json:"details"`
					} `json:"events"`
				} `json:"instanceAction"`
			}
			novaGet(t, nova, "/v2.1/servers/"+id+"/os-instance-actions/"+list.Actions[0].RequestID, "2.84", &act)
			if ev := act.Action.Events; len(ev) != 1 || ev[0].Event != "schedule_and_build_instances" ||
				ev[0].Result != "Error" || ev[0].Details != tc.want {
				t.Errorf("create's events = %+v, want schedule_and_build_instances in Error with %q", ev, tc.want)
			}
		})
	}
	// Nothing is left claimed by the failed requests.
	testwait.Poll(t, 30*time.Second, "no allocation left on any host", func() (bool, string) {
		rps, err := s.Placement().ListProviders(ctx, placement.ProviderQuery{})
		if err != nil {
			return false, err.Error()
		}
		var used []string
		for _, p := range rps {
			for rc, n := range p.Usages {
				if n != 0 {
					used = append(used, fmt.Sprintf("%s %s=%d", p.Name, rc, n))
				}
			}
		}
		return len(used) == 0, strings.Join(used, ", ")
	})
}
