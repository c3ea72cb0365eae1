package identity

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	s, _ := testService(t)
	demo := DerivedID("project", "demo")
	for _, tc := range []struct {
		desc    string
		auth    PasswordAuth
		wantErr bool
		want    Credentials
	}{
		{desc: "member by name on a project by name",
			auth: PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}},
			want: Credentials{UserID: DerivedID("user", "alice"), UserName: "alice", ProjectID: demo, ProjectName: "demo", Roles: []string{RoleMember, RoleReader}}},
		{desc: "user by id on a project by id",
			auth: PasswordAuth{UserID: "c0ffee", Password: "carol-pw", Scope: Scope{ProjectID: "0p5"}},
			want: Credentials{UserID: "c0ffee", UserName: "carol", ProjectID: "0p5", ProjectName: "ops", Roles: []string{RoleAdmin, RoleMember, RoleReader}}},
		{desc: "reader",
			auth: PasswordAuth{UserName: "bob", Password: "bob-pw", Scope: Scope{ProjectName: "demo"}},
			want: Credentials{UserID: DerivedID("user", "bob"), UserName: "bob", ProjectID: demo, ProjectName: "demo", Roles: []string{RoleReader}}},
		{desc: "system scope",
			auth: PasswordAuth{UserName: "carol", Password: "carol-pw", Scope: Scope{System: true}},
			want: Credentials{UserID: "c0ffee", UserName: "carol", System: true, Roles: []string{RoleAdmin, RoleMember, RoleReader}}},
		{desc: "unscoped: no roles",
			auth: PasswordAuth{UserName: "dave", Password: "dave-pw"},
			want: Credentials{UserID: DerivedID("user", "dave"), UserName: "dave"}},
		{desc: "wrong password", auth: PasswordAuth{UserName: "alice", Password: "bob-pw", Scope: Scope{ProjectName: "demo"}}, wantErr: true},
		{desc: "empty password", auth: PasswordAuth{UserName: "alice", Scope: Scope{ProjectName: "demo"}}, wantErr: true},
		{desc: "unknown user", auth: PasswordAuth{UserName: "mallory", Password: "alice-pw"}, wantErr: true},
		{desc: "unknown user id", auth: PasswordAuth{UserID: "nope", Password: "alice-pw"}, wantErr: true},
		{desc: "unknown project", auth: PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "nope"}}, wantErr: true},
		{desc: "no role on the project", auth: PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "ops"}}, wantErr: true},
		{desc: "project nobody is on", auth: PasswordAuth{UserName: "carol", Password: "carol-pw", Scope: Scope{ProjectName: "empty"}}, wantErr: true},
		{desc: "no role on the system", auth: PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{System: true}}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tok, err := s.Issue(tc.auth)
			if tc.wantErr {
				if !errors.Is(err, ErrUnauthorized) {
					t.Fatalf("Issue = %+v, %v; want ErrUnauthorized", tok, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if !credsEqual(tok.Credentials, tc.want) {
				t.Errorf("credentials = %+v, want %+v", tok.Credentials, tc.want)
			}
			if got := tok.ExpiresAt.Sub(tok.IssuedAt); got != time.Hour {
				t.Errorf("lifetime = %s, want the TTL", got)
			}
			back, err := s.Verify(tok.ID)
			if err != nil {
				t.Fatalf("Verify of a fresh token: %v", err)
			}
			if !credsEqual(back.Credentials, tc.want) || back.AuditID != tok.AuditID || !back.ExpiresAt.Equal(tok.ExpiresAt) {
				t.Errorf("Verify = %+v, want %+v", back, tok)
			}
		})
	}
}

func credsEqual(a, b Credentials) bool {
	return a.UserID == b.UserID && a.UserName == b.UserName && a.ProjectID == b.ProjectID &&
		a.ProjectName == b.ProjectName && a.System == b.System && slices.Equal(a.Roles, b.Roles)
}

func TestVerifyRefuses(t *testing.T) {
	s, now := testService(t)
	tok, err := s.Issue(PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	payload, mac, _ := strings.Cut(tok.ID, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	// The same claims for another project, keeping alice's signature.
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), DerivedID("project", "demo"), "0p5", 1))) + "." + mac
	flipped := []byte(mac)
	flipped[3] ^= 1
	other, err := New(testConfig(t), []byte("another key, also thirty-two b.."))
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := other.Issue(PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc  string
		token string
		at    time.Duration // after issue
		want  error
	}{
		{desc: "valid just before expiry", token: tok.ID, at: time.Hour - time.Microsecond},
		{desc: "expired at expires_at", token: tok.ID, at: time.Hour, want: ErrTokenExpired},
		{desc: "payload changed, signature kept", token: forged, want: ErrInvalidToken},
		{desc: "signature changed", token: payload + "." + string(flipped), want: ErrInvalidToken},
		{desc: "signature cut", token: payload + "." + mac[:10], want: ErrInvalidToken},
		{desc: "no signature", token: payload, want: ErrInvalidToken},
		{desc: "signed with another key", token: otherTok.ID, want: ErrInvalidToken},
		{desc: "empty", token: "", want: ErrInvalidToken},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			saved := *now
			defer func() { *now = saved }()
			*now = tok.IssuedAt.Add(tc.at)
			_, err := s.Verify(tc.token)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVerifyReadsRolesNow: a token's roles are the directory's at each
// check, so a removed assignment or user takes effect at once.
func TestVerifyReadsRolesNow(t *testing.T) {
	s, _ := testService(t)
	tok, err := s.Issue(PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(t)
	c.Assignments = slices.DeleteFunc(c.Assignments, func(a Assignment) bool { return a.User == "alice" })
	without, err := New(c, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.Verify(tok.ID); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify after the assignment went = %v, want ErrInvalidToken", err)
	}
	c.Users = c.Users[1:]
	gone, err := New(c, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Verify(tok.ID); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify after the user went = %v, want ErrInvalidToken", err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		change func(*Config)
		key    []byte
	}{
		{desc: "short key", change: func(*Config) {}, key: []byte("short")},
		{desc: "duplicate user", change: func(c *Config) { c.Users = append(c.Users, c.Users[0]) }},
		{desc: "unknown role", change: func(c *Config) { c.Assignments[0].Role = "owner" }},
		{desc: "unknown project", change: func(c *Config) { c.Assignments[0].Project = "nope" }},
		{desc: "unknown user", change: func(c *Config) { c.Assignments[0].User = "nope" }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := testConfig(t)
			tc.change(&c)
			key := tc.key
			if key == nil {
				key = testKey
			}
			if _, err := New(c, key); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func TestHashPassword(t *testing.T) {
	h, err := HashPassword("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if !passwordMatches(&user{hash: []byte(h)}, "s3cret") || passwordMatches(&user{hash: []byte(h)}, "s3cre") {
		t.Error("the hash does not check its password alone")
	}
	if _, err := HashPassword(""); err == nil {
		t.Error("an empty password was hashed")
	}
}

func TestCredentialsHasRole(t *testing.T) {
	c := Credentials{Roles: withImplied(nil, RoleMember)}
	if !c.HasRole(RoleMember) || !c.HasRole(RoleReader) || c.HasRole(RoleAdmin) {
		t.Errorf("member's roles = %v", c.Roles)
	}
}
