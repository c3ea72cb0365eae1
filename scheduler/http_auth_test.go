package scheduler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
)

// TestSelectDestinationsNeedsServiceToken: behind RequireServiceToken,
// a caller without a service token of this deployment's key gets 401
// and claims nothing; a Remote whose transport sends one is served.
func TestSelectDestinationsNeedsServiceToken(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 4096, false)
	key := []byte("0123456789abcdef0123456789abcdef")
	st, err := identity.NewServiceTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(RequireServiceToken(c.scheduler(DefaultConfig()).Handler(), st, nil))
	defer srv.Close()

	foreign, _ := identity.NewServiceTokens([]byte("another deployment's signing key"))
	foreignTok, _ := foreign.Mint()
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	users, err := identity.New(identity.Config{Users: []identity.User{{Name: "root", PasswordHash: string(h)}},
		Assignments: []identity.Assignment{{User: "root", System: true, Role: identity.RoleAdmin}}, TokenTTL: time.Hour}, key)
	if err != nil {
		t.Fatal(err)
	}
	adminTok, err := users.Issue(identity.PasswordAuth{UserName: "root", Password: "pw", Scope: identity.Scope{System: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ desc, token string }{
		{"anonymous", ""},
		{"garbage", "garbage"},
		{"another deployment's service token", foreignTok},
		{"a system admin's user token, same key", adminTok.ID},
	} {
		req, _ := http.NewRequest("POST", srv.URL+SelectPath, strings.NewReader(`{"instance_uuids": ["i-1"], "flavor": {"vcpus": 1, "memory_mb": 512}}`))
		if tc.token != "" {
			req.Header.Set("X-Auth-Token", tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.desc, resp.StatusCode)
		}
	}
	if u := c.usage("a"); u != 0 {
		t.Fatalf("refused callers claimed %d vCPUs", u)
	}
	r := &Remote{URL: srv.URL, Client: &http.Client{Transport: st.Transport(nil)}}
	sels, err := r.SelectDestinations(c.ctx, spec(1, 512, "web-1"))
	if err != nil {
		t.Fatalf("with a service token: %v", err)
	}
	if len(sels) != 1 || sels[0][0].ServiceHost != "a" || c.usage("a") != 1 {
		t.Errorf("selections %+v, usage %d", sels, c.usage("a"))
	}
}
