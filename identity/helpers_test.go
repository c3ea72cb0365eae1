package identity

import (
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// hash is a bcrypt hash at the minimum cost: the tests check logic, not
// bcrypt's slowness.
func hash(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// testConfig: alice is a member of demo, bob a reader of demo and of
// nothing else, carol admin of the system and of ops, dave has no role.
func testConfig(t testing.TB) Config {
	return Config{
		Users: []User{
			{Name: "alice", PasswordHash: hash(t, "alice-pw")},
			{Name: "bob", PasswordHash: hash(t, "bob-pw")},
			{ID: "c0ffee", Name: "carol", PasswordHash: hash(t, "carol-pw")},
			{Name: "dave", PasswordHash: hash(t, "dave-pw")},
		},
		Projects: []Project{{Name: "demo"}, {ID: "0p5", Name: "ops"}, {Name: "empty"}},
		Assignments: []Assignment{
			{User: "alice", Project: "demo", Role: RoleMember},
			{User: "bob", Project: "demo", Role: RoleReader},
			{User: "carol", System: true, Role: RoleAdmin},
			{User: "carol", Project: "ops", Role: RoleAdmin},
		},
		Endpoints: []Endpoint{
			{Type: "compute", Public: "http://10.0.0.5:8774/v2.1", Internal: "http://10.1.0.5:8774/v2.1", Admin: "http://10.2.0.5:8774/v2.1"},
			{Type: "placement", Public: "http://10.0.0.5:8778", Internal: "http://10.0.0.5:8778", Admin: "http://10.0.0.5:8778"},
		},
		Region:   "RegionOne",
		TokenTTL: time.Hour,
	}
}

// testService is a Service over testConfig whose clock the test moves.
func testService(t testing.TB) (*Service, *time.Time) {
	t.Helper()
	s, err := New(testConfig(t), testKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	return s, &now
}
