package identity

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestLoadSigningKeyOnceForAll: servers starting together get one key,
// the first written, and a later start reads it back.
func TestLoadSigningKeyOnceForAll(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	ctx := context.Background()
	const servers = 4
	got := make([][]byte, servers)
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = LoadSigningKey(ctx, cli, keys) }()
	}
	wg.Wait()
	for i := range servers {
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
		if len(got[i]) != signingKeyBytes || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("server %d got key %x, server 0 %x", i, got[i], got[0])
		}
	}
	again, err := LoadSigningKey(ctx, cli, keys)
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("restart read %x, %v; want %x", again, err, got[0])
	}
	// Another deployment's prefix has a key of its own.
	other, err := LoadSigningKey(ctx, cli, etcdschema.New("/u"))
	if err != nil || bytes.Equal(other, got[0]) {
		t.Fatalf("another prefix got %x, %v", other, err)
	}
}
