// Package identitytest is the callers every authorization matrix test
// sends (compute, /v1, Placement, image): one directory of users and one
// token per caller, so that each API's matrix asks the same people and a
// new kind of caller is added once.
package identitytest

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/testwait"
)

// Password is every user's password in Directory.
const Password = "pw"

// The projects of Directory's users, as the tokens carry them.
var (
	ProjectA = identity.DerivedID("project", "A")
	ProjectB = identity.DerivedID("project", "B")
)

// Directory is a reader and a member of project A, a member of B, an
// admin (root: of project C, since an admin acts on every project, and of
// the system) and a system reader (auditor), with tokens that live ttl.
func Directory(t testing.TB, ttl time.Duration) identity.Config {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	c := identity.Config{TokenTTL: ttl, Projects: []identity.Project{{Name: "A"}, {Name: "B"}, {Name: "C"}}}
	for _, u := range []struct{ name, project, role string }{
		{"reader-a", "A", identity.RoleReader}, {"member-a", "A", identity.RoleMember},
		{"member-b", "B", identity.RoleMember}, {"root", "C", identity.RoleAdmin},
	} {
		c.Users = append(c.Users, identity.User{Name: u.name, PasswordHash: string(h)})
		c.Assignments = append(c.Assignments, identity.Assignment{User: u.name, Project: u.project, Role: u.role})
	}
	c.Users = append(c.Users, identity.User{Name: "auditor", PasswordHash: string(h)})
	c.Assignments = append(c.Assignments, identity.Assignment{User: "auditor", System: true, Role: identity.RoleReader},
		identity.Assignment{User: "root", System: true, Role: identity.RoleAdmin})
	return c
}

// Tokens issues each caller's X-Auth-Token from svc (built on Directory
// and key): "anonymous" (""), "garbage token", "other key's token" (an
// admin's, signed by another deployment's key), "expired token", "reader
// of A", "member of B", "member of A", "admin" (project-scoped), "system
// reader" and "system admin".
func Tokens(t testing.TB, svc *identity.Service, key []byte) map[string]string {
	t.Helper()
	issue := func(s *identity.Service, user string, scope identity.Scope) string {
		t.Helper()
		tok, err := s.Issue(identity.PasswordAuth{UserName: user, Password: Password, Scope: scope})
		if err != nil {
			t.Fatalf("issue %s on %+v: %v", user, scope, err)
		}
		return tok.ID
	}
	project := func(name string) identity.Scope { return identity.Scope{ProjectName: name} }
	other, err := identity.New(Directory(t, time.Hour), []byte("another deployment's signing key!"))
	if err != nil {
		t.Fatal(err)
	}
	// A token of the same key and directory whose life is a microsecond.
	shortLived, err := identity.New(Directory(t, time.Microsecond), key)
	if err != nil {
		t.Fatal(err)
	}
	expired := issue(shortLived, "member-a", project("A"))
	testwait.Until(t, "the short-lived token to expire", func() bool {
		_, err := svc.Verify(expired)
		return errors.Is(err, identity.ErrTokenExpired)
	})
	return map[string]string{
		"anonymous": "", "garbage token": "garbage", "other key's token": issue(other, "root", project("C")),
		"expired token": expired,
		"reader of A":   issue(svc, "reader-a", project("A")), "member of B": issue(svc, "member-b", project("B")),
		"member of A": issue(svc, "member-a", project("A")), "admin": issue(svc, "root", project("C")),
		"system reader": issue(svc, "auditor", identity.Scope{System: true}),
		"system admin":  issue(svc, "root", identity.Scope{System: true}),
	}
}
