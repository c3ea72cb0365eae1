package compute

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-project/berth/quotas"
)

// unlimitedQuotas is every quota -1, as a Nova with quotas off answers.
func unlimitedQuotas() quotas.Limits {
	l := quotas.Limits{}
	for _, r := range quotas.Resources {
		l[r] = quotas.Unlimited
	}
	return l
}

// TestQuotasMatchNova replays testdata/nova_quotas.json, recorded from
// the real Nova 26 (testdata/nova_quotas.py): os-quota-sets' show,
// detail, defaults, update (schemas per microversion, force, user_id)
// and delete; limits with usage; and the 403s of server and server
// group creates over quota, word for word. Servers Berth creates stay
// build requests (no scheduler runs here): they count their flavor, as
// Nova's ACTIVE servers count their allocations.
func TestQuotasMatchNova(t *testing.T) {
	raw, err := os.ReadFile("testdata/nova_quotas.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Group   string `json:"group"`
		Answers []struct {
			Name     string          `json:"name"`
			Method   string          `json:"method"`
			Path     string          `json:"path"`
			Body     json.RawMessage `json:"body"`
			Version  string          `json:"version"`
			Status   int             `json:"status"`
			Response string          `json:"response"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Answers) < 60 {
		t.Fatalf("only %d recorded answers", len(rec.Answers))
	}
	a := newTestAPI(t)
	a.api.SetImages(testImages{novaCirros: {ID: novaCirros, Name: "cirros-0.6.2-x86_64-disk"}})
	if r := a.do("POST", "/v2.1/flavors", `{"flavor": {"name": "q.small", "id": "q1", "ram": 512, "vcpus": 2, "disk": 1}}`); r.Code != 200 {
		t.Fatalf("flavor create: %d %s", r.Code, r.Body)
	}
	// A created server's id and password, and a group's id, are the
	// only things Berth cannot share with the recording.
	uuidRE := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	passRE := regexp.MustCompile(`"adminPass": "[^"]*"`)
	norm := func(s string) string {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "http://127.0.0.1:20004", "{base}"), "http://nova.test:8774", "{base}")
		return passRE.ReplaceAllString(uuidRE.ReplaceAllString(s, "{uuid}"), `"adminPass": "{pass}"`)
	}
	group := ""
	for i, ans := range rec.Answers {
		body := ""
		if len(ans.Body) > 0 && string(ans.Body) != "null" {
			b := string(ans.Body)
			if group != "" {
				b = regexp.MustCompile(rec.Group).ReplaceAllString(b, group)
			}
			body = b
		}
		got := a.do(ans.Method, "/v2.1"+ans.Path, body, mv(ans.Version))
		if ans.Name == "group 1" {
			var g struct {
				ServerGroup struct{ ID string } `json:"server_group"`
			}
			if err := json.Unmarshal(got.Body.Bytes(), &g); err != nil {
				t.Fatalf("%d %s: %d %s", i, ans.Name, got.Code, got.Body)
			}
			group = g.ServerGroup.ID
		}
		gotBody, want := norm(got.Body.String()), norm(ans.Response)
		if got.Code != ans.Status || gotBody != want {
			t.Errorf("%d %s: %s %s (%s) %s\n got %d %s\nNova %d %s", i, ans.Name, ans.Method, ans.Path, ans.Version, body,
				got.Code, gotBody, ans.Status, want)
		}
	}
}
