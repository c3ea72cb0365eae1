package identity

import (
	"testing"
)

// TestProjectsHTTP: a project is read by an admin, a system reader or a
// token scoped to it; listing (by name) is an admin's or a system
// reader's only.
func TestProjectsHTTP(t *testing.T) {
	srv, _ := testAPI(t)
	issue := func(body string) string {
		resp, b := do(t, "POST", srv.URL+"/v3/auth/tokens", body, nil)
		if resp.StatusCode != 201 {
			t.Fatalf("issue: %d %v", resp.StatusCode, b)
		}
		return resp.Header.Get("X-Subject-Token")
	}
	alice := issue(passwordBody("alice", "alice-pw", demoScope))
	system := issue(passwordBody("carol", "carol-pw", `, "scope": {"system": {"all": true}}`))
	opsAdmin := issue(passwordBody("carol", "carol-pw", `, "scope": {"project": {"name": "ops", "domain": {"id": "default"}}}`))
	demo := DerivedID("project", "demo")
	for _, tc := range []struct {
		desc, token, path string
		want              int
		wantNames         []string // the projects answered
	}{
		{"a member reads its own project", alice, "/v3/projects/" + demo, 200, []string{"demo"}},
		{"a member may not read another", alice, "/v3/projects/0p5", 403, nil},
		{"a member may not list", alice, "/v3/projects?name=demo", 403, nil},
		{"an admin reads any", opsAdmin, "/v3/projects/" + demo, 200, []string{"demo"}},
		{"no such project", opsAdmin, "/v3/projects/nope", 404, nil},
		{"a system reader lists by name", system, "/v3/projects?name=ops", 200, []string{"ops"}},
		{"an unknown name lists none", system, "/v3/projects?name=nope", 200, []string{}},
		{"every project", system, "/v3/projects", 200, []string{"demo", "empty", "ops"}},
		{"no token", "", "/v3/projects/" + demo, 401, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := do(t, "GET", srv.URL+tc.path, "", map[string]string{"X-Auth-Token": tc.token})
			if resp.StatusCode != tc.want {
				t.Fatalf("%d %v, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.wantNames == nil {
				return
			}
			var got []string
			if p, ok := body["project"].(map[string]any); ok {
				got = append(got, p["name"].(string))
			}
			if ps, ok := body["projects"].([]any); ok {
				got = []string{}
				for _, p := range ps {
					got = append(got, p.(map[string]any)["name"].(string))
				}
			}
			if len(got) != len(tc.wantNames) {
				t.Fatalf("answered %v, want %v", got, tc.wantNames)
			}
			seen := map[string]bool{}
			for _, n := range got {
				seen[n] = true
			}
			for _, n := range tc.wantNames {
				if !seen[n] {
					t.Errorf("answered %v, want %v", got, tc.wantNames)
				}
			}
		})
	}
}
