package dump

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestTakeIsOneRevision reads (in chunks: etcd streams 10 keys first,
// then more) while another client keeps adding and rewriting keys: the
// snapshot must be exactly what a single read at its revision returns,
// not a mix of revisions.
func TestTakeIsOneRevision(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	keys := etcdschema.New("/berth")
	ctx := context.Background()
	put := func(host string, i int) {
		t.Helper()
		v := etcdschema.MustEncode(&etcdschema.HostSync{Host: host, UUIDs: []string{fmt.Sprint(i)}, At: time.Now().UTC()})
		if _, err := cli.Put(ctx, keys.HostSync(host), v); err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < 40; i++ {
		put(fmt.Sprintf("h%02d", i), 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			put(fmt.Sprintf("h%02d", i%60), i) // rewrites and new hosts, both
		}
	}()
	var snaps []*Snapshot
	for i := 0; i < 5; i++ {
		s, err := Take(ctx, cli, keys, Options{})
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	close(stop)
	wg.Wait()
	for _, s := range snaps {
		whole, err := cli.Get(ctx, keys.All(), clientv3.WithPrefix(), clientv3.WithRev(s.Revision))
		if err != nil {
			t.Fatal(err)
		}
		if len(whole.Kvs) != len(s.Entries) {
			t.Fatalf("snapshot at %d has %d keys, a single read at that revision %d", s.Revision, len(s.Entries), len(whole.Kvs))
		}
		for i, kv := range whole.Kvs {
			e := s.Entries[i]
			if e.Key != string(kv.Key) || e.ModRevision != kv.ModRevision || !bytes.Equal(e.Raw, kv.Value) || e.Err != nil {
				t.Fatalf("snapshot at %d, key %d: %s@%d (%v), a single read has %s@%d", s.Revision, i, e.Key, e.ModRevision, e.Err, kv.Key, kv.ModRevision)
			}
		}
	}
	if snaps[0].Revision == snaps[len(snaps)-1].Revision {
		t.Fatal("the writer did not write while the snapshots were taken; the test proves nothing")
	}
}

// TestDocumentRawValues: a value that is not UTF-8 is kept as base64, so
// the JSON dump loses no byte of it.
func TestDocumentRawValues(t *testing.T) {
	keys := etcdschema.New("/berth")
	bin := []byte{0xff, 0x00, 0xfe}
	s := &Snapshot{Prefix: "/berth", Revision: 7}
	for _, kv := range []struct {
		k string
		v []byte
	}{{keys.Service("h1"), bin}, {keys.All() + "zz/unknown", bin}, {keys.Alive("h1"), []byte(`{"version":1,"host":"h1"}`)}} {
		e := decode(keys, kv.k, kv.v)
		if e.Parsed.Kind == "" {
			s.Unknown = append(s.Unknown, e)
		} else {
			s.Entries = append(s.Entries, e)
		}
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	var d Document
	if err := json.Unmarshal(buf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	svc := d.Kinds["services"]
	if len(svc) != 1 || svc[0].RawBase64 != "/wD+" || svc[0].Error == "" || svc[0].Value != nil {
		t.Errorf("undecodable binary service: %+v", svc)
	}
	if len(d.Unknown) != 1 || d.Unknown[0].RawBase64 != "/wD+" {
		t.Errorf("unknown: %+v", d.Unknown)
	}
	if a := d.Kinds["alive"]; len(a) != 1 || a[0].Error != "" || a[0].Raw != "" {
		t.Errorf("alive: %+v", a)
	}
	// A host whose only service record is unreadable still shows, flagged.
	sum := s.Summarize()
	if len(sum.Hosts) != 1 || sum.Hosts[0].Service || sum.Hosts[0].State != "up" || sum.Undecodable != 1 {
		t.Errorf("summary: %+v", sum)
	}
}

// TestEveryKindHasAGroup keeps the JSON group names complete.
func TestEveryKindHasAGroup(t *testing.T) {
	seen := map[string]etcdschema.KeyKind{}
	for _, k := range etcdschema.KeyKinds() {
		g, ok := groups[k]
		if !ok {
			t.Errorf("kind %s has no group name", k)
		}
		if other, dup := seen[g]; dup {
			t.Errorf("kinds %s and %s share the group %q", k, other, g)
		}
		seen[g] = k
	}
}

// TestTakeStartsOverAfterCompaction: etcd compacts the snapshot's revision
// before it is read; the dump starts over at a new revision instead of
// failing or mixing revisions, and gives up with a clear error when that
// keeps happening.
func TestTakeStartsOverAfterCompaction(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	keys := etcdschema.New("/berth")
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		v := etcdschema.MustEncode(&etcdschema.Cell{Name: fmt.Sprintf("cell%d", i), UUID: fmt.Sprint(i)})
		if _, err := cli.Put(ctx, keys.Cell(fmt.Sprintf("cell%d", i)), v); err != nil {
			t.Fatal(err)
		}
	}
	compact := func(name string) {
		resp, err := cli.Put(ctx, keys.Cell(name), etcdschema.MustEncode(&etcdschema.Cell{Name: name}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
	}
	compactions := 0
	s, err := Take(ctx, cli, keys, Options{afterRevision: func(attempt int) {
		if attempt == 1 {
			compactions++
			compact("late")
		}
	}})
	if err != nil {
		t.Fatalf("dump after one compaction: %v", err)
	}
	if len(s.Entries) != 7 || s.Entries[len(s.Entries)-1].Key != keys.Cell("late") {
		t.Fatalf("dump after the compaction has %d keys (want 7, ending with the late cell): %+v", len(s.Entries), s.Entries)
	}

	_, err = Take(ctx, cli, keys, Options{afterRevision: func(int) {
		compactions++
		compact(fmt.Sprintf("again%d", compactions))
	}})
	if err == nil || !strings.Contains(err.Error(), "revision compacted during the read 3 times") {
		t.Fatalf("dump under constant compaction: %v", err)
	}
}

// TestClusterStatus: the dump reports etcd's members and each endpoint's
// status; an endpoint that does not answer is reported, not fatal.
func TestClusterStatus(t *testing.T) {
	srv := etcdtest.Start(t)
	dead := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL(), dead}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := Take(context.Background(), cli, etcdschema.New("/berth"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl := s.Cluster
	if cl == nil || cl.Error != "" || len(cl.Members) != 1 || !cl.Members[0].Leader ||
		!slices.Contains(cl.Members[0].ClientURLs, srv.ClientURL()) || cl.ClusterID == "" {
		t.Fatalf("cluster: %+v", cl)
	}
	if len(cl.Endpoints) != 2 || cl.Endpoints[0].Version == "" || cl.Endpoints[0].Leader != cl.Members[0].ID ||
		cl.Endpoints[0].MemberID != cl.Members[0].ID || cl.Endpoints[1].Error == "" {
		t.Fatalf("endpoints: %+v", cl.Endpoints)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), cl.Members[0].ID) || !strings.Contains(buf.String(), dead) {
		t.Errorf("table lacks the etcd member or the dead endpoint:\n%s", buf.String())
	}
}
