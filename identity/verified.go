package identity

import (
	"slices"
	"sync"
	"sync/atomic"
)

// verifiedTokens remembers the tokens Verify has accepted, so that a
// client presenting the same token on every request (`berth bench boot`
// sends 10,000 creates with one) pays one map lookup instead of an
// HMAC-SHA256, two base64 decodes and a JSON decode (some 6 µs and 20
// allocations a request).
//
// Why remembering changes no answer: what Verify checks besides the
// expiry is a pure function of the token string, because a Service's
// signing key and directory never change after New (a changed
// directory or key is a new Service, with an empty memory). The
// signature, the claims and the credentials they resolve to are
// therefore the same at every check; only the clock moves, and a
// remembered token's expiry is compared with s.now() at every hit
// exactly as a fresh check does. Only accepted tokens are remembered, so
// a guesser costs a full check every time and cannot fill the memory.
//
// The memory is bounded: past maxVerifiedTokens entries it is emptied
// and refills with the tokens still in use (a cloud with more live
// tokens than that pays the full check for some of them, never a wrong
// answer).
type verifiedTokens struct {
	byID sync.Map // token string → Token
	n    atomic.Int64
}

// maxVerifiedTokens bounds the memory (some 600 bytes a token).
const maxVerifiedTokens = 8192

// lookup returns the remembered Token for id, with a Roles slice of its
// own (a caller may keep or change what it is given).
func (v *verifiedTokens) lookup(id string) (Token, bool) {
	got, ok := v.byID.Load(id)
	if !ok {
		return Token{}, false
	}
	t := got.(Token)
	t.Credentials.Roles = slices.Clone(t.Credentials.Roles)
	return t, true
}

// remember keeps t, an accepted token, emptying the memory first when it
// is full.
func (v *verifiedTokens) remember(t Token) {
	if v.n.Add(1) > maxVerifiedTokens {
		v.byID.Clear()
		v.n.Store(1)
	}
	t.Credentials.Roles = slices.Clone(t.Credentials.Roles)
	v.byID.Store(t.ID, t)
}

// forget drops id (an expired token: it will never be accepted again).
func (v *verifiedTokens) forget(id string) {
	if _, ok := v.byID.LoadAndDelete(id); ok {
		v.n.Add(-1)
	}
}
