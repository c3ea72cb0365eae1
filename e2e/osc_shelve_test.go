package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/internal/testwait"
)

// TestOpenStackCLIShelve drives shelving with the real openstack CLI on
// a real stack (`berth dev`, shelved_offload_time 0 as in Nova):
// `server shelve --wait` ends SHELVED_OFFLOADED with no host and
// Placement holding nothing for it, `server unshelve --wait` ACTIVE on a
// host whose provider holds exactly its flavor again, under the
// server's own consumer; `server delete` of an offloaded server works.
func TestOpenStackCLIShelve(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	skipWithoutOSC(t)
	dev := startDevStack(t, 2, 1)
	apiURL := dev.apiURL
	placeURL := dev.placementURL
	openstack := computeCLI(t, apiURL+"/v2.1")
	show := func(id string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(openstack("server", "show", "-f", "json", id)), &m); err != nil {
			t.Fatalf("openstack server show: %v", err)
		}
		return m
	}
	placement := func(path string, out any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, placeURL+path, nil)
		if err != nil {
			t.Fatalf("placement %s: %v", path, err)
		}
		req.Header.Set("X-Auth-Token", "admin")
		req.Header.Set("OpenStack-API-Version", "placement 1.28")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("placement %s: %v", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(out) != nil {
			t.Fatalf("placement %s: %s", path, resp.Status)
		}
	}
	// usages is every host's VCPU and MEMORY_MB in use and what the
	// server's consumer holds, by host.
	usages := func(id string) (map[string]string, map[string]string) {
		t.Helper()
		hosts := map[string]string{}
		for _, h := range []string{"compute-1", "compute-2"} {
			var u struct {
				Usages map[string]int `json:"usages"`
			}
			placement("/resource_providers/"+agent.ProviderUUIDForHost(h)+"/usages", &u)
			hosts[h] = fmt.Sprintf("%d/%d", u.Usages["VCPU"], u.Usages["MEMORY_MB"])
		}
		var a struct {
			Allocations map[string]struct {
				Resources map[string]int `json:"resources"`
			} `json:"allocations"`
		}
		placement("/allocations/"+id, &a)
		held := map[string]string{}
		for _, h := range []string{"compute-1", "compute-2"} {
			if r, ok := a.Allocations[agent.ProviderUUIDForHost(h)]; ok {
				held[h] = fmt.Sprintf("%d/%d", r.Resources["VCPU"], r.Resources["MEMORY_MB"])
			}
		}
		return hosts, held
	}
	waitUsages := func(what, id string, wantHosts, wantHeld map[string]string) {
		t.Helper()
		testwait.Poll(t, 30*time.Second, what, func() (bool, string) {
			hosts, held := usages(id)
			return fmt.Sprint(hosts) == fmt.Sprint(wantHosts) && fmt.Sprint(held) == fmt.Sprint(wantHeld),
				fmt.Sprintf("hosts %v, server holds %v", hosts, held)
		})
	}
	const tinyUse = "1/512" // m1.tiny
	none := map[string]string{"compute-1": "0/0", "compute-2": "0/0"}

	out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.tiny", "--name", "shelf", "--host", "compute-1", "--wait",
		"-o", "value", "-c", "id")
	if err != nil {
		t.Fatalf("berth server create: %v\n%s", err, out)
	}
	// Stdout and stderr together (the wait's progress is on stderr):
	// the id is the last line.
	outLines := strings.Split(strings.TrimSpace(out), "\n")
	id := strings.TrimSpace(outLines[len(outLines)-1])
	waitUsages("the boot's claim", id, map[string]string{"compute-1": tinyUse, "compute-2": "0/0"},
		map[string]string{"compute-1": tinyUse})

	openstack("server", "shelve", "--wait", id)
	s := show(id)
	if s["status"] != "SHELVED_OFFLOADED" || s["OS-EXT-SRV-ATTR:host"] != nil {
		t.Fatalf("after server shelve --wait: %v on %v", s["status"], s["OS-EXT-SRV-ATTR:host"])
	}
	waitUsages("offloaded: nothing held", id, none, map[string]string{})

	openstack("server", "unshelve", "--wait", id)
	s = show(id)
	host, _ := s["OS-EXT-SRV-ATTR:host"].(string)
	if s["status"] != "ACTIVE" || host == "" {
		t.Fatalf("after server unshelve --wait: %v on %q", s["status"], host)
	}
	want := map[string]string{"compute-1": "0/0", "compute-2": "0/0"}
	want[host] = tinyUse
	waitUsages("unshelved: its flavor back on its host", id, want, map[string]string{host: tinyUse})

	openstack("server", "shelve", "--wait", id)
	openstack("server", "delete", "--wait", id)
	waitUsages("deleted while offloaded", id, none, map[string]string{})
}
