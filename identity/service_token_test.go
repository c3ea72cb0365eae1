package identity

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestServiceTokens(t *testing.T) {
	st, err := NewServiceTokens(testKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	st.now = func() time.Time { return now }
	tok, err := st.Mint()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := st.Verify(tok)
	if err != nil {
		t.Fatalf("Verify(minted) = %v", err)
	}
	if !creds.System || creds.UserName != ServiceUser || !creds.HasRole(RoleService) || creds.HasRole(RoleAdmin) {
		t.Errorf("credentials = %+v, want the system-scoped %s with role %s only", creds, ServiceUser, RoleService)
	}

	other, err := NewServiceTokens([]byte("another key, another deployment!"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Mint()
	users, _ := testService(t)
	carol, err := users.Issue(PasswordAuth{UserName: "carol", Password: "carol-pw", Scope: Scope{System: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a user-token check accepted a service token: %v", err)
	}
	for _, tc := range []struct{ desc, token string }{
		{"empty", ""},
		{"garbage", "not-a-token"},
		{"another deployment's key", foreign},
		{"a system admin's user token, same key", carol.ID},
		{"tampered", tok[:len(tok)-2] + "AA"},
	} {
		if _, err := st.Verify(tc.token); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: Verify = %v, want ErrInvalidToken", tc.desc, err)
		}
	}
	now = now.Add(DefaultServiceTokenTTL)
	if _, err := st.Verify(tok); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("at expiry: Verify = %v, want ErrTokenExpired", err)
	}
}

// TestServiceTransport: every request carries a valid token, the same
// one until half its life has passed, then a new one.
func TestServiceTransport(t *testing.T) {
	st, err := NewServiceTokens(testKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st.now = func() time.Time { return now }
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Auth-Token")
		if _, err := st.Verify(tok); err != nil {
			t.Errorf("request %d: %v", len(seen), err)
		}
		seen = append(seen, tok)
	}))
	defer srv.Close()
	cli := &http.Client{Transport: st.Transport(nil)}
	get := func() {
		t.Helper()
		resp, err := cli.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	get()
	now = now.Add(DefaultServiceTokenTTL/2 + time.Second)
	get()
	if len(seen) != 3 || seen[0] != seen[1] || seen[1] == seen[2] {
		t.Errorf("tokens sent: same twice then renewed expected, got %d distinct of %d", distinct(seen), len(seen))
	}
}

func distinct(s []string) int {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return len(m)
}
