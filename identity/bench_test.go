package identity

import "testing"

// BenchmarkVerify is the cost every authenticated API request pays with
// a token already accepted once (verified.go): a map lookup and the
// expiry. The first check of a token costs one HMAC-SHA256, a JSON
// decode and a directory lookup (no etcd, no bcrypt): some 6 µs and 20
// allocations before the memory existed.
func BenchmarkVerify(b *testing.B) {
	s, _ := testService(b)
	tok, err := s.Issue(PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServiceTokenVerify is the scheduler's check per
// select_destinations.
func BenchmarkServiceTokenVerify(b *testing.B) {
	st, err := NewServiceTokens(testKey)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := st.Mint()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
