package embedetcd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/testwait"
)

// TestThreeMemberCluster bootstraps three members the way three `berth etcd`
// processes do, checks a write through one is read through another, that
// the cluster keeps serving with one member stopped, and that the stopped
// member rejoins from its data directory and catches up.
func TestThreeMemberCluster(t *testing.T) {
	dir := t.TempDir()
	cfgs := make([]Config, 3)
	var peers []string
	for i := range cfgs {
		cfgs[i] = Config{
			Name:      fmt.Sprintf("etcd-%d", i+1),
			DataDir:   filepath.Join(dir, fmt.Sprintf("m%d", i+1)),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		}
		peers = append(peers, cfgs[i].Name+"="+cfgs[i].PeerURL)
	}
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(peers, ",")
	}

	// Each member is ready only once a quorum is up, so they start together.
	srvs := make([]*Server, 3)
	errs := make(chan error, 3)
	for i := range cfgs {
		go func(i int) {
			s, err := Start(cfgs[i])
			srvs[i] = s
			errs <- err
		}(i)
	}
	for range cfgs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range srvs {
			s.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srvs[0].Client().Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	got, err := srvs[2].Client().Get(ctx, "k") // linearizable: through raft
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("read through member 3 = %v, %v; want v1", got, err)
	}
	members, err := srvs[1].Client().MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("member list = %v, %v; want 3 members", members, err)
	}

	// The in-process client's Status and Defragment reach the member they
	// name (etcd's own would answer from this member whatever the
	// endpoint, and panic on Defragment): what the leader's etcd space
	// duty relies on.
	ids := map[uint64]string{}
	for _, m := range members.Members {
		st, err := srvs[0].Client().Status(ctx, m.ClientURLs[0])
		if err != nil {
			t.Fatalf("status of %s through member 1's in-process client: %v", m.Name, err)
		}
		if st.Header.MemberId != m.ID {
			t.Errorf("status of %s (%x) answered by member %x", m.Name, m.ID, st.Header.MemberId)
		}
		ids[st.Header.MemberId] = m.Name
	}
	if len(ids) != 3 {
		t.Errorf("statuses came from %v, want 3 members", ids)
	}
	for _, ep := range []string{cfgs[0].ClientURL, cfgs[1].ClientURL} {
		if _, err := srvs[0].Client().Defragment(ctx, ep); err != nil {
			t.Errorf("defragment %s through member 1's in-process client: %v", ep, err)
		}
	}

	// One member down: two of three are a quorum.
	srvs[2].Close()
	if _, err := srvs[1].Client().Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("write with one member down: %v", err)
	}

	// It comes back from its data (initial_cluster is ignored then) and
	// catches up with the write it missed.
	srvs[2], err = Start(cfgs[2])
	if err != nil {
		t.Fatalf("restart member 3: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfgs[2].ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	testwait.Poll(t, 30*time.Second, "member 3 to catch up", func() (bool, string) {
		got, err := cli.Get(ctx, "k", clientv3.WithSerializable()) // member 3's own copy
		if err != nil {
			return false, err.Error()
		}
		return len(got.Kvs) == 1 && string(got.Kvs[0].Value) == "v2", fmt.Sprintf("member 3 has %v", got.Kvs)
	})
}

func TestInitialClusterMustNameThisMember(t *testing.T) {
	_, err := Start(Config{
		Name:           "etcd-9",
		DataDir:        t.TempDir(),
		ClientURL:      fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		PeerURL:        "http://127.0.0.1:1",
		InitialCluster: "etcd-1=http://127.0.0.1:2,etcd-2=http://127.0.0.1:3",
	})
	if err == nil || !strings.Contains(err.Error(), `does not name this member "etcd-9"`) {
		t.Fatalf("Start = %v; want an error naming the missing member", err)
	}
}
