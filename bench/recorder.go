package bench

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// trace is one server's way through the pipeline, each stage the time the
// recorder's watch delivered the event that marks it.
type trace struct {
	postStart, postEnd time.Time // the client's POST /v2.1/servers
	buildRequest       time.Time // /build_requests/<uuid> put (API)
	lease              time.Time // /leases/build_requests/<uuid> put (superconductor took it)
	claim              time.Time // first /placement/consumers/<uuid> put (the claim transaction)
	cast               time.Time // first /hosts/<h>/builds/<uuid> put of op build (hand-off transaction)
	active             time.Time // /cells/<c>/instances/<uuid> put with status ACTIVE
	failed             bool      // ERROR status (in a cell, not cell0)
	noValidHost        bool      // buried in cell0
	casts              int       // build casts (1 + reschedules)
	deleted            bool      // instance mapping deleted
	done               chan struct{}
}

func (t *trace) finished() bool { return !t.active.IsZero() || t.failed || t.noValidHost }

// Recorder follows everything under the prefix with one watch. It
// timestamps each server's stages as the events arrive (one clock for the
// whole pipeline; a stage's time includes the watch's delivery delay, the
// same for every stage) and counts puts and deletes per key kind and the
// revisions (write transactions) that changed anything.
//
// It watches etcd directly rather than through internal/informer on
// purpose: a measurement must see every event from its first revision, and
// a gap (a compacted watch) must invalidate the run. The informer is built
// for the opposite, to hide a gap by listing the prefix again.
type Recorder struct {
	cli  *clientv3.Client
	keys etcdschema.Keys

	mu        sync.Mutex
	traces    map[string]*trace
	puts      map[string]int64
	deletes   map[string]int64
	revs      int64
	lastRev   int64
	counting  bool
	firstRev  int64
	finished  int
	follows   map[string]*follow // servers a resize churn client waits on
	cond      chan struct{}      // closed and replaced on every finished server
	activeErr error
}

// NewRecorder returns a recorder; Run starts it.
func NewRecorder(cli *clientv3.Client, keys etcdschema.Keys) *Recorder {
	return &Recorder{cli: cli, keys: keys, traces: map[string]*trace{}, puts: map[string]int64{},
		deletes: map[string]int64{}, cond: make(chan struct{})}
}

// Run watches from fromRev until ctx ends.
func (r *Recorder) Run(ctx context.Context, fromRev int64) error {
	wch := r.cli.Watch(clientv3.WithRequireLeader(ctx), r.keys.All(), clientv3.WithPrefix(), clientv3.WithRev(fromRev))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			r.mu.Lock()
			r.activeErr = err
			r.mu.Unlock()
			return fmt.Errorf("recorder: watch %s: %w", r.keys.All(), err)
		}
		now := time.Now()
		r.mu.Lock()
		for _, ev := range resp.Events {
			r.applyLocked(now, ev)
		}
		r.mu.Unlock()
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("recorder: watch %s closed", r.keys.All())
}

// StartCounting zeroes the write counters: what follows is the measured
// phase.
func (r *Recorder) StartCounting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.puts, r.deletes, r.revs, r.counting, r.firstRev = map[string]int64{}, map[string]int64{}, 0, true, 0
}

func (r *Recorder) traceLocked(id string) *trace {
	t := r.traces[id]
	if t == nil {
		t = &trace{done: make(chan struct{})}
		r.traces[id] = t
	}
	return t
}

func (r *Recorder) applyLocked(now time.Time, ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	kind := r.kind(key)
	del := ev.Type == clientv3.EventTypeDelete
	if r.counting {
		if del {
			r.deletes[kind]++
		} else {
			r.puts[kind]++
		}
		if ev.Kv.ModRevision != r.lastRev {
			r.revs++
			if r.firstRev == 0 {
				r.firstRev = ev.Kv.ModRevision
			}
		}
	}
	if ev.Kv.ModRevision > r.lastRev {
		r.lastRev = ev.Kv.ModRevision
	}
	k := r.keys
	switch kind {
	case "build_requests":
		if id, ok := etcdschema.LastSegment(key, k.BuildRequests()); ok && !del {
			if t := r.traceLocked(id); t.buildRequest.IsZero() {
				t.buildRequest = now
			}
		}
	case "leases/build_requests":
		if id, ok := etcdschema.LastSegment(key, k.BuildRequestLeases()); ok && !del {
			if t := r.traceLocked(id); t.lease.IsZero() {
				t.lease = now
			}
		}
	case "placement/consumers":
		if id, ok := etcdschema.LastSegment(key, k.Consumers()); ok && !del {
			if t := r.traces[id]; t != nil && t.claim.IsZero() {
				t.claim = now
			}
		}
	case "hosts/*/builds":
		if del {
			return
		}
		// The key ends in the instance's uuid: a cast of a server not
		// followed, or of one that has finished booting (a move's or a
		// delete's), is not decoded: during a drain or a resize churn
		// those are most casts, and the decoding is the tool's own cost.
		if t := r.traces[path.Base(key)]; t == nil || t.finished() {
			return
		}
		var b etcdschema.Build
		if etcdschema.Decode(key, ev.Kv.Value, &b) != nil || b.Op != etcdschema.OpBuild {
			return
		}
		if t := r.traces[b.InstanceUUID]; t != nil {
			if t.cast.IsZero() {
				t.cast = now
			}
			t.casts++
		}
	case "cells/*/instances":
		if del {
			return
		}
		id := path.Base(key)
		t := r.traces[id]
		f := r.follows[id]
		if (t == nil || t.finished()) && f == nil {
			return
		}
		var in etcdschema.Instance
		if etcdschema.Decode(key, ev.Kv.Value, &in) != nil {
			return
		}
		if f != nil {
			f.seen(&in)
		}
		if t == nil || t.finished() {
			return
		}
		cell := etcdschema.FirstSegment(key, k.CellsPrefix())
		switch {
		case cell == "cell0":
			t.noValidHost = true
		case in.Status == etcdschema.StatusActive:
			t.active = now
		case in.Status == etcdschema.StatusError:
			t.failed = true
		default:
			return
		}
		close(t.done)
		r.finished++
		close(r.cond)
		r.cond = make(chan struct{})
	case "instance_mappings":
		if id, ok := etcdschema.LastSegment(key, k.InstanceMappings()); ok && del {
			if t := r.traces[id]; t != nil {
				t.deleted = true
			}
		}
	}
}

// kind names a key's family: its first segment, or two for placement,
// leases and server groups, with host and cell names made "*".
func (r *Recorder) kind(key string) string {
	rel := strings.TrimPrefix(key, r.keys.All())
	seg := strings.Split(rel, "/")
	switch seg[0] {
	case "hosts", "cells":
		if len(seg) >= 3 {
			return seg[0] + "/*/" + seg[2]
		}
		return seg[0]
	case "placement", "leases", "elections", "members":
		if len(seg) >= 2 {
			return seg[0] + "/" + seg[1]
		}
	case "server_groups":
		if len(seg) >= 3 {
			return "server_groups/*/" + seg[2]
		}
	}
	return seg[0]
}

// Expect registers servers a client created, with its POST's times.
func (r *Recorder) Expect(ids []string, postStart, postEnd time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		t := r.traceLocked(id)
		t.postStart, t.postEnd = postStart, postEnd
	}
}

// Done is closed when the server is ACTIVE, ERROR or buried in cell0.
func (r *Recorder) Done(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.traceLocked(id).done
}

// WaitFinished waits until n servers of those expected have finished.
func (r *Recorder) WaitFinished(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		got, ch, err := r.finished, r.cond, r.activeErr
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d servers finished: %w", got, n, ctx.Err())
		}
	}
}

// Finished is how many servers have finished.
func (r *Recorder) Finished() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// Writes is what the counted phase wrote: distinct revisions, and puts
// and deletes per key kind.
type Writes struct {
	Revisions int64            `json:"revisions"`
	Puts      map[string]int64 `json:"puts"`
	Deletes   map[string]int64 `json:"deletes"`
}

func (r *Recorder) writes() Writes {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Writes{Revisions: r.revs, Puts: map[string]int64{}, Deletes: map[string]int64{}}
	for k, v := range r.puts {
		w.Puts[k] = v
	}
	for k, v := range r.deletes {
		w.Deletes[k] = v
	}
	return w
}

// stageSamples returns per-stage durations over the servers in ids.
func (r *Recorder) stageSamples(ids []string) (map[string][]time.Duration, outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := map[string][]time.Duration{}
	var o outcome
	add := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			s[name] = append(s[name], to.Sub(from))
		}
	}
	for _, id := range ids {
		t := r.traces[id]
		if t == nil {
			o.Lost++
			continue
		}
		switch {
		case !t.active.IsZero():
			o.Active++
		case t.failed:
			o.Error++
		case t.noValidHost:
			o.NoValidHost++
		default:
			o.Lost++
		}
		if t.casts > 1 {
			o.Reschedules += t.casts - 1
		}
		add("api_accept", t.postStart, t.postEnd)
		add("queue", t.buildRequest, t.lease)
		add("schedule", t.lease, t.claim)
		add("handoff", t.claim, t.cast)
		add("build", t.cast, t.active)
		add("total", t.postStart, t.active)
		if !t.active.IsZero() {
			if o.firstStart.IsZero() || t.postStart.Before(o.firstStart) {
				o.firstStart = t.postStart
			}
			if t.active.After(o.lastActive) {
				o.lastActive = t.active
			}
		}
	}
	for _, v := range s {
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	}
	return s, o
}

type outcome struct {
	Active, Error, NoValidHost, Lost, Reschedules int
	firstStart, lastActive                        time.Time
}

func (r *Recorder) isActive(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.traces[id]
	return t != nil && !t.active.IsZero()
}

// claimSpan is how many of ids were claimed and the time from the first
// claim to the last.
func (r *Recorder) claimSpan(ids []string) (int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first, last time.Time
	n := 0
	for _, id := range ids {
		t := r.traces[id]
		if t == nil || t.claim.IsZero() {
			continue
		}
		n++
		if first.IsZero() || t.claim.Before(first) {
			first = t.claim
		}
		if t.claim.After(last) {
			last = t.claim
		}
	}
	return n, last.Sub(first)
}

// follow is a server a client waits on beyond its boot (a resize churn's
// server): the last state of its instance record the watch delivered.
type follow struct {
	last    instanceState
	at      time.Time
	seq     uint64        // records seen
	changed chan struct{} // closed and replaced on every record seen
}

func (f *follow) seen(in *etcdschema.Instance) {
	f.last = instanceState{Status: in.Status, TaskState: in.TaskState, Flavor: in.Flavor.Name, Migration: in.MigrationUUID, Cell: in.Cell}
	f.at = time.Now()
	f.seq++
	close(f.changed)
	f.changed = make(chan struct{})
}

// instanceState is what WaitInstance's test sees of a followed server.
type instanceState struct{ Status, TaskState, Flavor, Migration, Cell string }

// Follow makes the recorder keep id's instance state from its next put
// on, for WaitInstance; Unfollow forgets it.
func (r *Recorder) Follow(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follows == nil {
		r.follows = map[string]*follow{}
	}
	if r.follows[id] == nil {
		r.follows[id] = &follow{changed: make(chan struct{})}
	}
}

// Unfollow forgets a server Follow followed.
func (r *Recorder) Unfollow(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.follows, id)
}

// Seen is how many records of the followed server id the watch has
// delivered: a WaitInstance from it sees only records written later.
func (r *Recorder) Seen(id string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.follows[id]; f != nil {
		return f.seq
	}
	return 0
}

// WaitInstance waits until a record of the followed server id, delivered
// after the first `after` (Seen), satisfies ok; it returns that state
// and when it arrived, or an error with the last state seen when ctx
// ends first.
func (r *Recorder) WaitInstance(ctx context.Context, id string, after uint64, ok func(instanceState) bool) (instanceState, time.Time, error) {
	for {
		r.mu.Lock()
		f, err := r.follows[id], r.activeErr
		if f == nil {
			r.mu.Unlock()
			return instanceState{}, time.Time{}, fmt.Errorf("server %s is not followed", id)
		}
		st, at, seq, ch := f.last, f.at, f.seq, f.changed
		r.mu.Unlock()
		if err != nil {
			return st, at, err
		}
		if seq > after && ok(st) {
			return st, at, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, at, fmt.Errorf("server %s last seen %+v: %w", id, st, ctx.Err())
		}
	}
}
