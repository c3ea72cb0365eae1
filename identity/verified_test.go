package identity

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestVerifyRemembersOnlyWhatCannotChange: a remembered token answers as
// a fresh check would at every instant of its life and after it (the
// expiry is compared at each hit), a caller changing its credentials
// changes no later answer, and refused tokens are never remembered.
func TestVerifyRemembersOnlyWhatCannotChange(t *testing.T) {
	s, now := testService(t)
	tok, err := s.Issue(PasswordAuth{UserName: "alice", Password: "alice-pw", Scope: Scope{ProjectName: "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := New(testConfig(t), testKey) // the same checks without a memory of them
	if err != nil {
		t.Fatal(err)
	}
	fresh.now = s.now
	for _, tc := range []struct {
		desc string
		at   time.Duration // after issue
		want error
	}{
		{desc: "first check, remembered", at: 0},
		{desc: "remembered, half-way", at: 30 * time.Minute},
		{desc: "remembered, just before expiry", at: time.Hour - time.Microsecond},
		{desc: "remembered, at expires_at", at: time.Hour, want: ErrTokenExpired},
		{desc: "forgotten, after expiry", at: 2 * time.Hour, want: ErrTokenExpired},
		{desc: "the clock set back: checked afresh", at: time.Minute},
	} {
		*now = tok.IssuedAt.Add(tc.at)
		got, err := s.Verify(tok.ID)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Fatalf("%s: Verify = %v, want %v", tc.desc, err, tc.want)
		}
		want, wantErr := fresh.Verify(tok.ID)
		if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) {
			t.Errorf("%s: remembered Verify = %+v, %v; a fresh check = %+v, %v", tc.desc, got, err, want, wantErr)
		}
		if err == nil {
			got.Credentials.Roles[0] = "admin" // a careless caller
			again, _ := s.Verify(tok.ID)
			if !reflect.DeepEqual(again, want) {
				t.Errorf("%s: after a caller changed its roles, Verify = %+v, want %+v", tc.desc, again, want)
			}
		}
	}

	*now = tok.IssuedAt
	forged := tok.ID[:len(tok.ID)-2] + "AA"
	for range 2 {
		if _, err := s.Verify(forged); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("forged token: Verify = %v, want ErrInvalidToken", err)
		}
	}
	if _, ok := s.verified.byID.Load(forged); ok {
		t.Error("a refused token was remembered")
	}
}

// TestVerifiedTokensBounded: the memory never holds more than
// maxVerifiedTokens tokens, and a token pushed out is checked afresh.
func TestVerifiedTokensBounded(t *testing.T) {
	var v verifiedTokens
	for i := range maxVerifiedTokens + 10 {
		v.remember(Token{ID: strconv.Itoa(i), Credentials: Credentials{Roles: []string{"member"}}})
	}
	held := 0
	v.byID.Range(func(any, any) bool { held++; return true })
	if held > maxVerifiedTokens || int64(held) != v.n.Load() {
		t.Errorf("memory holds %d tokens (counted %d), want at most %d", held, v.n.Load(), maxVerifiedTokens)
	}
	if _, ok := v.lookup("0"); ok {
		t.Error("the first token is still remembered after the memory filled")
	}
	if got, ok := v.lookup(strconv.Itoa(maxVerifiedTokens + 9)); !ok || got.Credentials.Roles[0] != "member" {
		t.Errorf("the last token remembered: %+v, %v", got, ok)
	}
}
