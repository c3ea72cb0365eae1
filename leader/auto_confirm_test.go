package leader

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/servers"
)

// TestAutoConfirmResizes runs the leader with a resize_confirm_window
// over real etcd and the real servers store: the resize finished before
// the window is confirmed (its source cast the confirm, under a request id
// of its own, marked automatic), the one inside it is left, and the
// migrations Nova sets to error instead (server gone, server in ERROR) are,
// while a server being deleted is skipped.
func TestAutoConfirmResizes(t *testing.T) {
	c := newCloud(t)
	k := c.keys
	now := time.Now().UTC()
	old, recent := now.Add(-2*time.Hour), now.Add(-time.Minute)
	type server struct {
		desc          string
		status, task  string
		finished      time.Time
		noServer      bool
		wantStatus    string
		wantReason    string
		wantMapping   bool
		wantConfirmed bool
	}
	cases := []server{
		{desc: "due", status: etcdschema.StatusVerifyResize, finished: old,
			wantStatus: etcdschema.MigrationConfirming, wantMapping: true, wantConfirmed: true},
		{desc: "inside the window", status: etcdschema.StatusVerifyResize, finished: recent,
			wantStatus: etcdschema.MigrationFinished, wantMapping: true},
		{desc: "server in error", status: etcdschema.StatusError, finished: old,
			wantStatus: etcdschema.MigrationError, wantReason: "In ERROR state", wantMapping: true},
		{desc: "server gone", noServer: true, finished: old,
			wantStatus: etcdschema.MigrationError, wantReason: "not found"},
		{desc: "server being deleted", status: etcdschema.StatusVerifyResize, task: etcdschema.TaskDeleting, finished: old,
			wantStatus: etcdschema.MigrationFinished, wantMapping: true},
		{desc: "server busy otherwise", status: etcdschema.StatusVerifyResize, task: etcdschema.TaskResizeReverting, finished: old,
			wantStatus: etcdschema.MigrationError, wantReason: "In states VERIFY_RESIZE/resize_reverting", wantMapping: true},
	}
	small := etcdschema.Flavor{ID: "1", Name: "small", VCPUs: 1, RAMMB: 512}
	big := etcdschema.Flavor{ID: "2", Name: "big", VCPUs: 2, RAMMB: 1024}
	for i, s := range cases {
		id, mig := "srv-"+string(rune('a'+i)), "mig-"+string(rune('a'+i))
		if !s.noServer {
			c.put(k.InstanceMapping(id), &etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1", ProjectID: "p"})
			c.put(k.CellInstance("cell1", id), &etcdschema.Instance{UUID: id, Cell: "cell1", ProjectID: "p", UserID: "u",
				Status: s.status, TaskState: s.task, Host: "dst", Node: "dst", Flavor: big, MigrationUUID: mig, UpdatedAt: s.finished})
		}
		c.put(k.Migration("cell1", mig), &etcdschema.Migration{UUID: mig, InstanceUUID: id, Cell: "cell1", ProjectID: "p", UserID: "u",
			MigrationType: etcdschema.MigrationTypeResize, Status: etcdschema.MigrationFinished, SourceHost: "src", SourceNode: "src",
			DestHost: "dst", DestNode: "dst", OldFlavor: small, NewFlavor: big, RequestID: "req-resize",
			CreatedAt: s.finished.Add(-time.Minute), UpdatedAt: s.finished})
		c.put(k.MigrationMapping(mig), &etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1", ProjectID: "p"})
	}

	store := servers.New(c.cli, k, c.place, hclog.NewNullLogger())
	cfg := c.duties(now, 1).DutyConfig
	cfg.Now, cfg.Interval, cfg.ResizeConfirmWindow, cfg.Confirmer = nil, 20*time.Millisecond, time.Hour, store
	ctx, stop := context.WithCancel(c.ctx)
	l := New(Config{Client: c.cli, Keys: k, Election: testElection, ID: "a", TTL: 60 * time.Second,
		Log: hclog.NewNullLogger(), Duties: Duties(cfg)})
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	migration := func(i int) etcdschema.Migration {
		var m etcdschema.Migration
		key := k.Migration("cell1", "mig-"+string(rune('a'+i)))
		resp, err := c.cli.Get(c.ctx, key)
		if err != nil || len(resp.Kvs) == 0 || etcdschema.Decode(key, resp.Kvs[0].Value, &m) != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		return m
	}
	// Every case ends in one sweep; the last to change is waited for.
	testwait.Until(t, "the due migrations handled", func() bool {
		for i, s := range cases {
			if s.wantStatus != etcdschema.MigrationFinished && migration(i).Status == etcdschema.MigrationFinished {
				return false
			}
		}
		return true
	})
	for i, s := range cases {
		t.Run(s.desc, func(t *testing.T) {
			m := migration(i)
			if m.Status != s.wantStatus || !strings.Contains(m.Error, s.wantReason) {
				t.Errorf("migration %s (%q), want %s (%q)", m.Status, m.Error, s.wantStatus, s.wantReason)
			}
			if got := c.exists(k.MigrationMapping(m.UUID)); got != s.wantMapping {
				t.Errorf("migration mapping present = %v, want %v", got, s.wantMapping)
			}
			cast := c.exists(k.Build("src", m.InstanceUUID))
			if cast != s.wantConfirmed || m.AutoConfirmed != s.wantConfirmed {
				t.Errorf("confirm cast to the source = %v, auto_confirmed = %v; want %v", cast, m.AutoConfirmed, s.wantConfirmed)
			}
			if s.wantConfirmed && (!strings.HasPrefix(m.ConfirmRequestID, "req-") || m.ConfirmRequestID == m.RequestID || m.ConfirmedAt == nil) {
				t.Errorf("confirm request id %q (resize's %q), confirmed at %v", m.ConfirmRequestID, m.RequestID, m.ConfirmedAt)
			}
		})
	}
}

// With Nova's default window, 0, or nothing to confirm through, the duty
// is not run at all.
func TestAutoConfirmOffByDefault(t *testing.T) {
	names := func(cfg DutyConfig) []string {
		var out []string
		for _, d := range Duties(cfg) {
			out = append(out, d.Name)
		}
		return out
	}
	store := servers.New(nil, etcdschema.New("/t"), nil, nil)
	for _, tc := range []struct {
		desc   string
		window time.Duration
		conf   ResizeConfirmer
		want   bool
	}{
		{"window 0", 0, store, false},
		{"no confirmer", time.Hour, nil, false},
		{"window set", time.Hour, store, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := strings.Contains(strings.Join(names(DutyConfig{ResizeConfirmWindow: tc.window, Confirmer: tc.conf}), ","), "auto_confirm_resizes")
			if got != tc.want {
				t.Errorf("auto_confirm_resizes run = %v, want %v", got, tc.want)
			}
		})
	}
}
