package drain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/servers"
)

// rig is a dev cloud of one cell whose scheduler leader runs the drain
// duty, with the drain and server operations over its etcd.
type rig struct {
	t       *testing.T
	ctx     context.Context
	s       *stack.Stack
	cli     *clientv3.Client
	keys    etcdschema.Keys
	c       *api.Client
	hosts   *hosts.Store
	drains  *drain.Store
	servers *servers.Store
}

// rigOptions shape a rig: its hosts, how long each simulated build or
// move step takes, and what to do with etcd before the cloud starts
// (start a rival leader candidate).
type rigOptions struct {
	hosts     int
	buildTime time.Duration
	before    func(cli *clientv3.Client, keys etcdschema.Keys)
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	// The default leader interval (30 s): every drain here must move on
	// the watches (a drain's record, its cells' migrations) and keep its
	// deadline by its timer, never wait for the interval.
	cfg.Scheduler.ElectionTTL = 2 * time.Second
	cli := etcdtest.Client(t)
	keys := etcdschema.New(cfg.Etcd.Prefix)
	s := stack.New(cfg, hclog.NewNullLogger())
	// Attach instruments cli's KV: before anything else uses cli.
	s.Attach(cli)
	if o.before != nil {
		o.before(cli, keys)
	}
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if err := stack.Dev(stack.DevOptions{Hosts: o.hosts, Cells: 1, BuildTime: o.buildTime, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	hs := hosts.New(cli, keys, nil)
	r := &rig{t: t, ctx: ctx, s: s, cli: cli, keys: keys, c: api.NewClient(s.Endpoint("compute API")),
		hosts: hs, drains: drain.NewStore(cli, keys, hs, nil), servers: servers.New(cli, keys, nil, nil)}
	testwait.Poll(t, 30*time.Second, "every host up", func() (bool, string) {
		all, err := r.c.ListHosts(ctx)
		up := 0
		for _, h := range all {
			if h.State == "up" {
				up++
			}
		}
		return err == nil && up == o.hosts, fmt.Sprintf("%d up (%v)", up, err)
	})
	return r
}

// boot makes n servers on host and waits until every one is ACTIVE.
func (r *rig) boot(host string, n int) []string {
	r.t.Helper()
	resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: "d", Flavor: "m1.tiny", Count: n, Host: host})
	if err != nil {
		r.t.Fatal(err)
	}
	var ids []string
	for _, s := range resp.Servers {
		ids = append(ids, s.ID)
	}
	testwait.Poll(r.t, time.Minute, fmt.Sprintf("%d servers ACTIVE on %s", n, host), func() (bool, string) {
		for _, id := range ids {
			v, err := r.servers.Lookup(r.ctx, id)
			if err != nil || v.Instance == nil || v.Instance.Status != etcdschema.StatusActive {
				return false, fmt.Sprintf("%s: %+v %v", id, v, err)
			}
		}
		return true, ""
	})
	return ids
}

// waitDrain polls host's drain until done says so.
func (r *rig) waitDrain(host, what string, done func(d *etcdschema.HostDrain) bool) *etcdschema.HostDrain {
	r.t.Helper()
	var d *etcdschema.HostDrain
	testwait.Poll(r.t, 2*time.Minute, what, func() (bool, string) {
		var err error
		d, err = r.drains.Get(r.ctx, host)
		if err != nil {
			return false, err.Error()
		}
		return done(d), fmt.Sprintf("%s %v %s", d.State, d.Counts(), d.Error)
	})
	return d
}

// settled says a drain ended and follows no move any more.
func settled(d *etcdschema.HostDrain) bool {
	return etcdschema.DrainFinal(d.State) && d.Counts()[etcdschema.DrainMoving] == 0
}

// migrationsOf lists the migrations the drain started (its request id),
// by server.
func (r *rig) migrationsOf(d *etcdschema.HostDrain) map[string][]servers.MigrationRecord {
	r.t.Helper()
	all, err := r.servers.Migrations(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string][]servers.MigrationRecord{}
	for _, m := range all {
		if m.RequestID == d.RequestID {
			out[m.InstanceUUID] = append(out[m.InstanceUUID], m)
		}
	}
	return out
}

// hostOf is the host a server is on now.
func (r *rig) hostOf(id string) string {
	r.t.Helper()
	v, err := r.servers.Lookup(r.ctx, id)
	if err != nil || v.Instance == nil {
		r.t.Fatalf("look up %s: %+v %v", id, v, err)
	}
	return v.Instance.Host
}
