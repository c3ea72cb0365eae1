// Package etcdtest starts a real embedded etcd for a test, on free loopback
// ports in the test's temp dir, and tears it down when the test ends.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/freeport"
	"github.com/berth-project/berth/internal/rawtxn"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a process or member that must be told its port before it binds:
// drawn below the kernel's ephemeral range (see package freeport) and
// released when the test ends.
func FreePort(t testing.TB) int {
	t.Helper()
	return freeport.Take(t)
}

// Start runs a fresh member and returns it; it is closed at cleanup.
func Start(t testing.TB) *embedetcd.Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with the member's config changed by mod first (a
// small QuotaBackendBytes, say); mod may be nil.
func StartWith(t testing.TB, mod func(*embedetcd.Config)) *embedetcd.Server {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ { // a "free" port can be taken between probe and bind
		cfg := embedetcd.Config{
			DataDir:   t.TempDir(),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
		}
		if mod != nil {
			mod(&cfg)
		}
		srv, err := embedetcd.Start(cfg)
		if err == nil {
			t.Cleanup(srv.Close)
			return srv
		}
		lastErr = err
	}
	t.Fatalf("start embedded etcd: %v", lastErr)
	return nil
}

// Client starts a fresh member and returns its in-process client.
func Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return Start(t).Client()
}

// NetClient starts a fresh member and returns a gRPC client to it, for tests
// that must exercise the networked path (leases expiring, watches cancelled).
func NetClient(t testing.TB) (*embedetcd.Server, *clientv3.Client) {
	t.Helper()
	srv := Start(t)
	cc := clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialOptions: etcdgrpc.DialOptions()}
	cli, err := clientv3.New(cc)
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	rawtxn.Networked(cli, cc) // as the stack's networked client is
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}

// Cluster is n embedded members of one etcd cluster, on loopback ports,
// whose members a test can stop and start again on their data dirs (to
// take its quorum away and give it back).
type Cluster struct {
	t    testing.TB
	cfgs []embedetcd.Config
	srvs []*embedetcd.Server
}

// StartCluster starts n members together (each is ready only once a quorum
// is up) and closes them at cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, cfgs: make([]embedetcd.Config, n), srvs: make([]*embedetcd.Server, n)}
	dir := t.TempDir()
	var peers []string
	for i := range c.cfgs {
		c.cfgs[i] = embedetcd.Config{
			Name:      fmt.Sprintf("etcd-%d", i+1),
			DataDir:   filepath.Join(dir, fmt.Sprintf("etcd-%d", i+1)),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
		}
		peers = append(peers, c.cfgs[i].Name+"="+c.cfgs[i].PeerURL)
	}
	errs := make(chan error, n)
	for i := range c.cfgs {
		c.cfgs[i].InitialCluster = strings.Join(peers, ",")
		go func(i int) {
			s, err := embedetcd.Start(c.cfgs[i])
			c.srvs[i] = s
			errs <- err
		}(i)
	}
	var failed error
	for range c.cfgs {
		if err := <-errs; err != nil && failed == nil {
			failed = err
		}
	}
	t.Cleanup(func() {
		for _, s := range c.srvs {
			if s != nil {
				s.Close()
			}
		}
	})
	if failed != nil {
		t.Fatalf("start a cluster of %d: %v", n, failed)
	}
	return c
}

// Endpoints are every member's client URL.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, cfg := range c.cfgs {
		out = append(out, cfg.ClientURL)
	}
	return out
}

// Client is a gRPC client to every member, closed at cleanup.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialOptions: etcdgrpc.DialOptions()})
	if err != nil {
		c.t.Fatalf("etcd client: %v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// Stop stops member i (0-based).
func (c *Cluster) Stop(i int) {
	if s := c.srvs[i]; s != nil {
		s.Close()
		c.srvs[i] = nil
	}
}

// Restart starts a stopped member i again on its data dir. It returns
// once the member serves, which needs a quorum: restarting the member
// that gives one back returns when the cluster has it again.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	s, err := embedetcd.Start(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("restart %s: %v", c.cfgs[i].Name, err)
	}
	c.srvs[i] = s
}

// FillUntilNoSpace rewrites a few keys outside Berth's prefix with 64 KiB
// values until etcd refuses a write with NOSPACE, as a churn's history
// does while its live data stays small; it fails the test if four times
// quota bytes raised no alarm.
func FillUntilNoSpace(t testing.TB, cli *clientv3.Client, quota int) {
	t.Helper()
	ctx := context.Background()
	val := strings.Repeat("f", 64<<10)
	for i := 0; i < 4*quota/len(val); i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/fill/%d", i%4), val)
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			return
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Fatalf("wrote %d bytes into a %d-byte quota and etcd raised no NOSPACE", 4*quota, quota)
}
