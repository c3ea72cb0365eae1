package bench

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdtest"
)

// novaRig is the compute API in keystone mode over real etcd, and
// Berth's identity API issuing its tokens, both over real HTTP.
func novaRig(t *testing.T) (computeURL string, creds Credentials) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.New(identity.Config{TokenTTL: time.Hour, Projects: []identity.Project{{Name: "bench"}},
		Users:       []identity.User{{Name: "bench", PasswordHash: string(hash)}},
		Assignments: []identity.Assignment{{User: "bench", Project: "bench", Role: identity.RoleMember}}},
		[]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	idSrv := httptest.NewServer(identity.NewAPI(svc, hclog.NewNullLogger()))
	t.Cleanup(idSrv.Close)
	cli := etcdtest.Client(t)
	nova := compute.New(cli, etcdschema.New("/nova-rig"), hclog.NewNullLogger())
	nova.SetAuth(compute.Auth{Mode: compute.AuthKeystone, Verifier: svc.Verifier(), IdentityURI: idSrv.URL + "/v3"})
	novaSrv := httptest.NewServer(nova)
	t.Cleanup(novaSrv.Close)
	return novaSrv.URL, Credentials{AuthURL: idSrv.URL + "/v3", User: "bench", Password: "pw", Project: "bench"}
}

// TestNovaClientTokens: the tool logs in once and reuses its token; a
// token the API refuses (401) is replaced by one new login and the
// request repeated; a login that fails is the request's error, never a
// loop; and without credentials the token is noauth2's, which a keystone
// API refuses.
func TestNovaClientTokens(t *testing.T) {
	url, creds := novaRig(t)
	ctx := context.Background()
	for _, tc := range []struct {
		desc       string
		creds      *Credentials
		stale      string // a token the client holds at first
		wantErr    int    // the status of the error, 0 for none
		wantLogins int64
	}{
		{desc: "one login for many requests", creds: &creds, wantLogins: 1},
		{desc: "a refused token is replaced once", creds: &creds, stale: "expired-or-garbage", wantLogins: 1},
		{desc: "noauth2's token against keystone", creds: nil, wantErr: http.StatusUnauthorized},
	} {
		c := newNovaClient(url, http.DefaultClient, tc.creds)
		if tc.stale != "" {
			c.setToken(tc.stale)
		}
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			_, err = c.createServerGroup(ctx, "g", "anti-affinity")
		}
		var apiErr *api.APIError
		switch {
		case tc.wantErr == 0 && err != nil:
			t.Errorf("%s: %v", tc.desc, err)
		case tc.wantErr != 0 && (!errors.As(err, &apiErr) || apiErr.Status != tc.wantErr):
			t.Errorf("%s: %v, want a %d", tc.desc, err, tc.wantErr)
		}
		if got := c.logins.Load(); got != tc.wantLogins {
			t.Errorf("%s: %d logins, want %d", tc.desc, got, tc.wantLogins)
		}
	}
	bad := creds
	bad.Password = "wrong"
	c := newNovaClient(url, http.DefaultClient, &bad)
	if _, err := c.createServerGroup(ctx, "g", "affinity"); err == nil {
		t.Error("a wrong password created a group")
	}
	if c.logins.Load() != 0 {
		t.Errorf("%d logins with a wrong password", c.logins.Load())
	}
}
