package drain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/leader"
	"github.com/berth-project/berth/servers"
)

// Mover is what the duty needs of the server operations for cold moves:
// servers.Store's migrate and confirm.
type Mover interface {
	Move(ctx context.Context, id string, r servers.MoveRequest) (*etcdschema.Migration, error)
	ConfirmResize(ctx context.Context, id, requestID string) error
	Lookup(ctx context.Context, id string) (*servers.Server, error)
}

// DutyConfig configures the leader's drain duty.
type DutyConfig struct {
	Client  *clientv3.Client
	Keys    etcdschema.Keys
	Servers Mover
	// Live does live drains (nil: they end at once with
	// ErrLiveUnavailable).
	Live LiveMigrator
	// Interval is how often a drain is looked at when nothing it
	// watches changed (deadlines, a lost watch event); the duty wakes
	// at once on a change of a drain or of a migration in a cell it moves
	// servers of.
	Interval time.Duration
	Log      hclog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// DutyName names the duty in logs and metrics.
const DutyName = "host_drains"

// Duty returns the leader duty that works every drain.
func Duty(c DutyConfig) leader.Duty {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = hclog.NewNullLogger()
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	d := &duty{DutyConfig: c}
	return leader.Duty{Name: DutyName, Interval: c.Interval, Run: d.run}
}

type duty struct {
	DutyConfig
}

// run works the drains for as long as this term lasts: a sweep, then a
// wait for a drain or a followed cell's migrations to change, or for the
// interval. It returns on an error (the leader runs it again next
// interval) and on leadership lost (leader.ErrNotLeader).
func (d *duty) run(ctx context.Context, f leader.Fence) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	notify := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	follow := func(prefix string) {
		// A wake-up only: the events' values are not read (a watch
		// always carries them; clientv3 ignores WithKeysOnly on a watch).
		wch := d.Client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix())
		go func() {
			for range wch {
				notify()
			}
		}()
	}
	follow(d.Keys.HostDrains())
	watched := map[string]bool{}
	tick := time.NewTicker(d.Interval)
	defer tick.Stop()
	for {
		cells, next, err := d.sweep(ctx, f)
		if err != nil {
			return err
		}
		for cell := range cells {
			if !watched[cell] {
				watched[cell] = true
				follow(d.Keys.Migrations(cell))
			}
		}
		// A deadline is kept to the moment, not to the next interval.
		var deadline <-chan time.Time
		var timer *time.Timer
		if !next.IsZero() {
			timer = time.NewTimer(max(next.Sub(d.Now()), 0))
			deadline = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-tick.C:
		case <-deadline:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// sweepParallel is how many drains one sweep works at once. Each drain's
// step is a handful of etcd round trips (read its migrations, list its
// host, confirm or start moves, write its record), independent of the
// other drains' (a record each, every write fenced and compared): worked
// one after the other, 100 drains made a sweep of seconds on a loaded
// etcd, and every move waited a sweep to start and another to be
// confirmed. 16 at a time still left a drained move waiting 3.6 s (p50)
// for its confirm at 100 drains; 64 brought that to 1.0 s.
const sweepParallel = 64

// sweep works every drain that is draining or has moves in flight,
// sweepParallel at a time, and returns the cells of the servers it
// follows and the nearest deadline of a drain still draining (zero:
// none).
func (d *duty) sweep(ctx context.Context, f leader.Fence) (map[string]bool, time.Time, error) {
	var next time.Time
	resp, err := d.Client.Get(ctx, d.Keys.HostDrains(), clientv3.WithPrefix())
	if err != nil {
		return nil, next, fmt.Errorf("list drains: %w", err)
	}
	cells := map[string]bool{}
	var mu sync.Mutex
	var stop error // leadership lost or ctx ended: the sweep's error
	var wg sync.WaitGroup
	sem := make(chan struct{}, sweepParallel)
	for _, kv := range resp.Kvs {
		rec := new(etcdschema.HostDrain)
		if err := etcdschema.Decode(string(kv.Key), kv.Value, rec); err != nil {
			d.Log.Warn("leaving an unreadable drain", "key", string(kv.Key), "error", err)
			continue
		}
		if !active(rec) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(key string, rev int64) {
			defer func() { <-sem; wg.Done() }()
			if err := d.work(ctx, f, key, rev, rec); err != nil {
				if errors.Is(err, leader.ErrNotLeader) || ctx.Err() != nil {
					mu.Lock()
					stop = cmp.Or(stop, err)
					mu.Unlock()
					return
				}
				d.Log.Warn("drain step failed; trying again", "host", rec.Host, "error", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if rec.State == etcdschema.DrainDraining && rec.Deadline != nil && (next.IsZero() || rec.Deadline.Before(next)) {
				next = *rec.Deadline
			}
			for _, s := range rec.Instances {
				if s.Cell != "" && s.State == etcdschema.DrainMoving {
					cells[s.Cell] = true
				}
			}
		}(string(kv.Key), kv.ModRevision)
	}
	wg.Wait()
	if stop != nil {
		return nil, next, stop
	}
	return cells, next, nil
}

// active says whether the duty has anything to do for rec: start moves,
// follow the moves in flight of a drain that ended, or give up its
// waiting servers (giveUpWaiting).
func active(rec *etcdschema.HostDrain) bool {
	if rec.State == etcdschema.DrainDraining {
		return true
	}
	for _, s := range rec.Instances {
		if s.State == etcdschema.DrainMoving || (s.State == etcdschema.DrainWaiting && s.FinishedAt == nil) {
			return true
		}
	}
	return false
}
