package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/quotas"
)

// TestQuotaChurnRecovers churns creates and deletes against a small
// quota on a whole dev stack (scheduler, superconductor, conductors, three
// fake hosts, one of which fails every build so servers reschedule or end
// in ERROR): at every sample the project's live servers fit its quota;
// at the end every accepted server not deleted is there (none lost),
// every deleted one is gone, and the quota's in_use equals what exists.
// Then everything is deleted and, with no operator, the whole quota is
// free again: exactly the limit of servers is accepted, and one more is
// refused in Nova's words.
func TestQuotaChurnRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("a churn on a whole dev stack")
	}
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := Dev(DevOptions{Hosts: 3, Cells: 2, FailHosts: map[string]bool{"compute-3": true}, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	base := s.Endpoint("compute API") + "/v2.1"
	testwait.Poll(t, 30*time.Second, "three hosts up", func() (bool, string) {
		hosts, err := api.NewClient(s.Endpoint("compute API")).ListHosts(ctx)
		up := 0
		for _, h := range hosts {
			if h.State == "up" {
				up++
			}
		}
		return err == nil && up == 3, fmt.Sprintf("%d up (%v)", up, err)
	})
	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Auth-Token", token)
		req.Header.Set("OpenStack-API-Version", "compute 2.47")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const admin, user = "admin:admin", "u:churn"
	const instances, cores = 6, 8
	if code, body := call("POST", "/flavors", admin, `{"flavor": {"name": "c2", "id": "c2", "ram": 512, "vcpus": 2, "disk": 1}}`); code != 200 {
		t.Fatalf("flavor: %d %s", code, body)
	}
	if code, body := call("PUT", "/os-quota-sets/churn", admin,
		fmt.Sprintf(`{"quota_set": {"instances": %d, "cores": %d}}`, instances, cores)); code != 200 {
		t.Fatalf("quota: %d %s", code, body)
	}
	image := images.DefaultID(images.DefaultSleepImage)
	create := func(flavor string) (int, string) {
		return call("POST", "/servers", user, `{"server": {"name": "c", "flavorRef": "`+flavor+`", "imageRef": "`+image+
			`", "networks": "none"}}`)
	}
	type listed struct {
		ID, Status string
		Task       *string             `json:"OS-EXT-STS:task_state"`
		Flavor     struct{ VCPUs int } `json:"flavor"`
	}
	list := func() []listed {
		code, body := call("GET", "/servers/detail", user, "")
		var l struct{ Servers []listed }
		if code != 200 || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("list: %d %s", code, body)
		}
		return l.Servers
	}
	// live is what a sample counts against the quota: servers whose
	// delete was not accepted, and the cores of those not in ERROR.
	live := func(ls []listed) (n, vcpus int) {
		for _, l := range ls {
			if l.Task != nil && *l.Task == "deleting" {
				continue
			}
			n++
			if l.Status != "ERROR" {
				vcpus += l.Flavor.VCPUs
			}
		}
		return n, vcpus
	}

	// The project's quota usage record (package quotas, record.go) is
	// never below its count, whatever the churn is doing.
	usage := quotas.New(s.cli, s.keys, nil, nil)
	auditUsage := func(when string) {
		a, err := usage.AuditUsage(ctx, "churn")
		if err != nil {
			t.Errorf("%s: audit the quota usage record: %v", when, err)
		} else if below := a.Below(); len(below) > 0 {
			t.Errorf("%s: the quota usage record is below the count: %v", when, below)
		}
	}

	var mu sync.Mutex
	accepted, deleted := map[string]bool{}, map[string]bool{}
	tried, refused, samples := 0, 0, 0
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []string
			for range 20 {
				flavor := "1"
				if rng.IntN(2) == 0 {
					flavor = "c2"
				}
				code, body := create(flavor)
				mu.Lock()
				tried++
				switch {
				case code == 202:
					var r struct{ Server struct{ ID string } }
					_ = json.Unmarshal([]byte(body), &r)
					accepted[r.Server.ID] = true
					mine = append(mine, r.Server.ID)
				case code == 403 && strings.Contains(body, "Quota exceeded for "):
					refused++
				default:
					t.Errorf("create: %d %s", code, body)
				}
				mu.Unlock()
				if len(mine) > 0 && rng.IntN(3) > 0 {
					i := rng.IntN(len(mine))
					id := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					if code, body := call("DELETE", "/servers/"+id, user, ""); code != 204 {
						t.Errorf("delete %s: %d %s", id, code, body)
					}
					mu.Lock()
					deleted[id] = true
					mu.Unlock()
				}
				if n, v := live(list()); n > instances || v > cores {
					t.Errorf("sample: %d live servers with %d cores, over the quota of %d and %d", n, v, instances, cores)
				}
				auditUsage("sample")
				mu.Lock()
				samples++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("churn: %d creates tried, %d accepted, %d refused over quota, %d deleted; %d samples within the quota",
		tried, len(accepted), refused, len(deleted), samples)
	if len(accepted) == 0 || refused == 0 {
		t.Fatalf("the churn never reached the quota (%d accepted, %d refused)", len(accepted), refused)
	}

	// Settled: no server in BUILD, every deleted one gone, every other one
	// there, and in_use agreeing with what exists.
	testwait.Poll(t, 2*time.Minute, "servers settled", func() (bool, string) {
		ls := list()
		building, gone := 0, 0
		for _, l := range ls {
			if l.Status == "BUILD" || deleted[l.ID] {
				building++
			}
		}
		for id := range accepted {
			if code, _ := call("GET", "/servers/"+id, user, ""); code == 404 && !deleted[id] {
				t.Fatalf("server %s was accepted, never deleted, and is gone", id)
			} else if code == 404 {
				gone++
			}
		}
		return building == 0 && gone == len(deleted), fmt.Sprintf("%d building or being deleted, %d of %d deleted gone",
			building, gone, len(deleted))
	})
	ls := list()
	if len(ls) != len(accepted)-len(deleted) {
		t.Errorf("%d servers listed, want the %d accepted and not deleted", len(ls), len(accepted)-len(deleted))
	}
	inUse := func() map[string]int {
		code, body := call("GET", "/os-quota-sets/churn/detail", admin, "")
		var d struct {
			QuotaSet map[string]json.RawMessage `json:"quota_set"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
			t.Fatalf("detail: %d %s", code, body)
		}
		out := map[string]int{}
		for k, v := range d.QuotaSet {
			var e struct {
				InUse int `json:"in_use"`
			}
			if json.Unmarshal(v, &e) == nil {
				out[k] = e.InUse
			}
		}
		return out
	}
	auditUsage("settled")
	n, v := live(ls)
	if u := inUse(); u["instances"] != n || u["cores"] != v {
		t.Errorf("in_use %v, want %d instances and %d cores as listed", u, n, v)
	}

	// Recovery: delete everything; the whole quota comes back by itself.
	for _, l := range ls {
		if code, body := call("DELETE", "/servers/"+l.ID, user, ""); code != 204 {
			t.Errorf("delete %s: %d %s", l.ID, code, body)
		}
	}
	testwait.Poll(t, time.Minute, "the quota's usage back to nothing", func() (bool, string) {
		u := inUse()
		return u["instances"] == 0 && u["cores"] == 0 && u["ram"] == 0, fmt.Sprint(u)
	})
	for i := range instances {
		if code, body := create("1"); code != 202 {
			t.Fatalf("create %d of %d after the churn: %d %s", i+1, instances, code, body)
		}
	}
	want := fmt.Sprintf(`{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used %d of %d instances"}}`,
		instances, instances)
	if code, body := create("1"); code != 403 || body != want {
		t.Errorf("one more than the quota: %d %s\nwant 403 %s", code, body, want)
	}
	auditUsage("after the recovery")
}
