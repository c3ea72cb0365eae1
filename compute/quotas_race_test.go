package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
)

// quotaRig is two compute APIs (two API workers) over one real etcd,
// each behind its own real HTTP listener, and project "race" with
// flavor "q2" (2 VCPU, 512 MB).
type quotaRig struct {
	t    *testing.T
	cli  *clientv3.Client
	keys etcdschema.Keys
	urls []string
}

func newQuotaRig(t *testing.T) *quotaRig {
	a := newTestAPI(t)
	r := &quotaRig{t: t, cli: a.cli, keys: a.keys}
	a.api.SetImages(testImages{novaCirros: {ID: novaCirros, Name: "cirros"}})
	second := New(a.cli, a.keys, hclog.NewNullLogger())
	second.SetImages(testImages{novaCirros: {ID: novaCirros, Name: "cirros"}})
	for _, h := range []http.Handler{a.h, second.Beside(api.New(a.cli, a.keys, nil, hclog.NewNullLogger()))} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		r.urls = append(r.urls, srv.URL)
	}
	if code, body := r.call(0, "POST", "/flavors", "admin:ops", `{"flavor": {"name": "q2", "id": "q2", "ram": 512, "vcpus": 2, "disk": 1}}`); code != 200 {
		t.Fatalf("flavor: %d %s", code, body)
	}
	return r
}

// call sends one request to worker w as token ("user:project") and
// returns the status and body.
func (r *quotaRig) call(w int, method, path, token, body string) (int, string) {
	req, err := http.NewRequest(method, r.urls[w%len(r.urls)]+"/v2.1"+path, strings.NewReader(body))
	if err != nil {
		r.t.Error(err)
		return 0, ""
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("OpenStack-API-Version", "compute 2.64")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// setQuota sets project race's quotas as the admin.
func (r *quotaRig) setQuota(set string) {
	if code, body := r.call(0, "PUT", "/os-quota-sets/race", "admin:ops", `{"quota_set": {`+set+`}}`); code != 200 {
		r.t.Fatalf("quota set: %d %s", code, body)
	}
}

// detail is project race's quota detail: in_use per resource.
func (r *quotaRig) inUse() map[string]int {
	code, body := r.call(0, "GET", "/os-quota-sets/race/detail", "admin:ops", "")
	var d struct {
		QuotaSet map[string]json.RawMessage `json:"quota_set"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
		r.t.Fatalf("detail: %d %s", code, body)
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

// mappings counts project race's instance mappings in etcd.
func (r *quotaRig) mappings() int {
	resp, err := r.cli.Get(context.Background(), r.keys.InstanceMappings(), clientv3.WithPrefix())
	if err != nil {
		r.t.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		var m etcdschema.InstanceMapping
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			r.t.Fatal(err)
		}
		if m.ProjectID == "race" {
			n++
		}
	}
	return n
}

// TestQuotaRaceNeverExceeded: many creates at once in one project at
// its limit, spread over two API workers, through real HTTP and real
// etcd. Exactly the room is created, never more, and every refusal is
// Nova's 403 in Nova's words.
func TestQuotaRaceNeverExceeded(t *testing.T) {
	for _, c := range []struct {
		desc, quota string
		body        string // the create, in the server's members
		room        int    // servers that fit
		words       string // every refusal says
	}{
		{"instances", `"instances": 7, "cores": -1, "ram": -1`, ``, 7,
			"Quota exceeded for instances: Requested 1, but already used 7 of 7 instances"},
		{"cores", `"instances": -1, "cores": 13, "ram": -1`, ``, 6,
			"Quota exceeded for cores: Requested 2, but already used 12 of 13 cores"},
		{"ram, two servers a request", `"instances": -1, "cores": -1, "ram": 4096`, `, "min_count": 2, "max_count": 2`, 8,
			"Quota exceeded for ram: Requested 1024, but already used 4096 of 4096 ram"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			r := newQuotaRig(t)
			r.setQuota(c.quota)
			const tries = 40
			var wg sync.WaitGroup
			codes := make([]int, tries)
			bodies := make([]string, tries)
			for i := range tries {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], bodies[i] = r.call(i, "POST", "/servers", fmt.Sprintf("u%d:race", i),
						`{"server": {"name": "r", "flavorRef": "q2", "imageRef": "`+novaCirros+`", "networks": "none"`+c.body+`}}`)
				}()
			}
			wg.Wait()
			created, refused := 0, 0
			per := 1
			if c.body != "" {
				per = 2
			}
			for i, code := range codes {
				switch code {
				case 202:
					created += per
				case 403:
					refused++
					want := `{"forbidden": {"code": 403, "message": "` + c.words + `"}}`
					if bodies[i] != want {
						t.Errorf("refusal %d: %s\nwant %s", i, bodies[i], want)
					}
				default:
					t.Errorf("create %d: %d %s", i, code, bodies[i])
				}
			}
			t.Logf("%d requests: %d servers created, %d refused", tries, created, refused)
			if created != c.room {
				t.Errorf("created %d servers, want exactly the room, %d", created, c.room)
			}
			if n := r.mappings(); n != created {
				t.Errorf("etcd holds %d servers of the project, the API accepted %d", n, created)
			}
			used := r.inUse()
			if used["instances"] != created || used["cores"] != 2*created || used["ram"] != 512*created {
				t.Errorf("in use %v after %d servers", used, created)
			}
		})
	}
}

// TestQuotaRaceServerGroups: groups created at once never pass the
// server_groups quota, nor servers joining one group its members quota.
func TestQuotaRaceServerGroups(t *testing.T) {
	r := newQuotaRig(t)
	r.setQuota(`"server_groups": 3, "server_group_members": 4, "instances": -1, "cores": -1, "ram": -1`)
	const tries = 20
	var wg sync.WaitGroup
	codes := make([]int, tries)
	bodies := make([]string, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], bodies[i] = r.call(i, "POST", "/os-server-groups", "u:race",
				`{"server_group": {"name": "g", "policy": "soft-affinity"}}`)
		}()
	}
	wg.Wait()
	var group string
	made := 0
	for i, code := range codes {
		switch {
		case code == 200:
			made++
			var g struct {
				ServerGroup struct{ ID string } `json:"server_group"`
			}
			_ = json.Unmarshal([]byte(bodies[i]), &g)
			group = g.ServerGroup.ID
		case code != 403 || bodies[i] != `{"forbidden": {"code": 403, "message": "Quota exceeded, too many server groups."}}`:
			t.Errorf("group create %d: %d %s", i, code, bodies[i])
		}
	}
	if made != 3 {
		t.Fatalf("%d groups created under a quota of 3", made)
	}
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], bodies[i] = r.call(i, "POST", "/servers", "u:race", `{"server": {"name": "m", "flavorRef": "q2", "imageRef": "`+
				novaCirros+`", "networks": "none"}, "os:scheduler_hints": {"group": "`+group+`"}}`)
		}()
	}
	wg.Wait()
	joined := 0
	for i, code := range codes {
		switch {
		case code == 202:
			joined++
		case code != 403 || bodies[i] != `{"forbidden": {"code": 403, "message": "Quota exceeded, too many servers in group"}}`:
			t.Errorf("member create %d: %d %s", i, code, bodies[i])
		}
	}
	t.Logf("%d groups of %d tries; %d members of %d tries", made, tries, joined, tries)
	if joined != 4 {
		t.Errorf("%d servers joined a group whose members quota is 4", joined)
	}
}
