package placement

import (
	"slices"
	"testing"
	"time"
)

// TestListProvidersByCreation: providers list in the order their keys
// were created in etcd (Placement's id order), whatever their creation
// times say, both in an index that followed the creations and in one
// loaded after them; a provider whose creation revision the index does
// not know sorts last.
func TestListProvidersByCreation(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	// A clock that goes back: creation times say the opposite order.
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { at = at.Add(-time.Minute); return at }
	created := []string{"c-rp", "a-rp", "d-rp", "b-rp"}
	for _, u := range created {
		mkProvider(t, s, u, "", nil)
	}
	syncIdx(t, s)
	loaded := startOn(t, cli)
	for name, svc := range map[string]*Service{"followed": s, "loaded": loaded} {
		got, err := svc.ListProviders(ctx, ProviderQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var uuids []string
		for _, p := range got {
			uuids = append(uuids, p.UUID)
		}
		if !slices.Equal(uuids, created) {
			t.Errorf("%s index lists %v, want creation order %v", name, uuids, created)
		}
	}
	// Forget a-rp's creation revision, as for a provider first indexed
	// from an assumed claim: it goes last.
	s.idx.mu.Lock()
	s.idx.st.providers["a-rp"].createRev = 0
	s.idx.mu.Unlock()
	got, err := s.ListProviders(ctx, ProviderQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1].UUID; last != "a-rp" {
		t.Errorf("a provider of unknown creation order listed at %v, want last", last)
	}
}
