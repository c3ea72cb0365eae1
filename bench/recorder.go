package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtally"
)

// trace is one server's way through the pipeline, each stage the time the
// recorder's watch delivered the event that marks it, or one of a later
// revision if that came first (arrivalLocked).
type trace struct {
	postStart, postEnd time.Time // the client's POST /v2.1/servers
	buildRequest       time.Time // /build_requests/<uuid> put (API)
	lease              time.Time // /leases/build_requests/<uuid> put (superconductor took it)
	claim              time.Time // first /placement/consumers/<uuid> put (the claim transaction)
	cast               time.Time // first build cast: its instance record's put in the hand-off transaction (castRecord)
	active             time.Time // /cells/<c>/instances/<uuid> put with status ACTIVE
	failed             bool      // ERROR status (in a cell, not cell0)
	noValidHost        bool      // buried in cell0
	casts              int       // build casts (1 + reschedules)
	finishRev          int64     // the revision of the record that finished it
	deleted            bool      // instance mapping deleted
	done               chan struct{}
	// spawning: the last record of its boot the recorder saw was a cast's
	// (castRecord); the next cast's record follows one that is not.
	spawning bool
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
//
// With the member in the tool's own process (member set), it watches
// only what it times and counts the writes afterwards: the member's work
// for the recorder during the measured phase is then about five events
// a server instead of some fourteen (runTimed, writes).
type Recorder struct {
	cli    *clientv3.Client
	keys   etcdschema.Keys
	pfx    recorderPrefixes
	member recorderMember // nil: one watch of everything, counted as it arrives
	// tally counts the member's watch stream (-etcd-tally), which the
	// tally's client wrapper does not see; nil when off.
	tally *etcdtally.Tally

	// kinds names the events' key kinds (under mu).
	kinds keyKinds

	mu      sync.Mutex
	traces  map[string]*trace
	puts    map[string]int64
	deletes map[string]int64
	revs    int64
	lastRev int64
	// reordered counts events delivered after one of a later revision.
	reordered int64
	// advances are the revisions that were the latest yet when they
	// arrived, with their arrival, in the order of both (arrivalLocked).
	advances  []revArrival
	counting  bool
	firstRev  int64
	finished  int
	follows   map[string]*follow // servers a resize churn client waits on
	cond      chan struct{}      // closed and replaced on every finished server
	activeErr error
}

// NewRecorder returns a recorder; Run starts it.
func NewRecorder(cli *clientv3.Client, keys etcdschema.Keys) *Recorder {
	pfx := newRecorderPrefixes(keys)
	return &Recorder{cli: cli, keys: keys, pfx: pfx, kinds: newKeyKinds(pfx.all),
		traces: map[string]*trace{}, puts: map[string]int64{},
		deletes: map[string]int64{}, cond: make(chan struct{})}
}

// recorderMember is what the recorder reads of an etcd member in the
// tool's own process (embedetcd.Server).
type recorderMember interface {
	WatchClient() pb.WatchClient
	History(prefix string, from, to int64, fn func(embedetcd.Change)) error
}

// ReadMember makes the recorder read m, the member in the tool's process
// that it watches, directly: one ordered watch stream over the prefixes
// it times, and the measured phase's writes from m's history once the
// phase is over. tally, when set, counts the stream's responses and
// events as the client's watches are counted. Call it before Run.
func (r *Recorder) ReadMember(m recorderMember, tally *etcdtally.Tally) {
	r.member, r.tally = m, tally
}

// Run watches from fromRev until ctx ends.
func (r *Recorder) Run(ctx context.Context, fromRev int64) error {
	if r.member != nil {
		return r.runTimed(ctx, fromRev)
	}
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
	// Reading the member, the writes are counted from its history
	// (writes), not from the watch, which sees only what it times.
	r.puts, r.deletes, r.revs, r.counting, r.firstRev = map[string]int64{}, map[string]int64{}, 0, r.member == nil, 0
	r.reordered = 0
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
	key := ev.Kv.Key
	kind := r.kinds.of(key)
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
	if ev.Kv.ModRevision < r.lastRev {
		// Only the member's stream, several watches on it, can do this:
		// one watch caught up after falling behind (etcd's victims and
		// unsynced watchers), behind another.
		r.reordered++
	}
	now = r.arrivalLocked(now, ev.Kv.ModRevision)
	// Every key the recorder times ends in the server's uuid; it is looked
	// up as bytes (no string is made) and decoded only for a server it
	// follows that has not finished: the decoding is the tool's own cost.
	id := lastSegment(key)
	switch kind {
	case "build_requests":
		if !del && r.isChild(key, r.pfx.buildRequests) {
			if t := r.traceLocked(string(id)); t.buildRequest.IsZero() {
				t.buildRequest = now
			}
		}
	case "leases/build_requests":
		if !del && r.isChild(key, r.pfx.leases) {
			if t := r.traceLocked(string(id)); t.lease.IsZero() {
				t.lease = now
			}
		}
	case "placement/consumers":
		if !del && r.isChild(key, r.pfx.consumers) {
			if t := r.traces[string(id)]; t != nil && t.claim.IsZero() {
				t.claim = now
			}
		}
	case "cells/*/instances":
		if del {
			return
		}
		t := r.traces[string(id)]
		f := r.follows[string(id)]
		if (t == nil || t.finished()) && f == nil {
			return
		}
		if t != nil && !t.finished() {
			// A build cast is timed and counted from the instance record
			// its transaction writes beside it (castRecord), in the same
			// revision: no watch of /hosts/ for it.
			cast := castRecord(ev.Kv.Value)
			if cast && !t.spawning {
				if t.cast.IsZero() {
					t.cast = now
				}
				t.casts++
			}
			t.spawning = cast
		}
		// A booting server's record is read for its status alone, not
		// decoded (recordStatus): the whole record is decoded only for a
		// followed server, whose state the churn client waits on.
		status := recordStatus(ev.Kv.Value)
		if f != nil {
			var in recordedInstance
			if json.Unmarshal(ev.Kv.Value, &in) != nil {
				return
			}
			f.seen(&in)
			status = []byte(in.Status)
		}
		if t == nil || t.finished() {
			return
		}
		switch {
		case r.inCell0(key):
			t.noValidHost = true
		case string(status) == etcdschema.StatusActive:
			t.active = now
		case string(status) == etcdschema.StatusError:
			t.failed = true
		default:
			return
		}
		t.finishRev = ev.Kv.ModRevision
		close(t.done)
		r.finished++
		close(r.cond)
		r.cond = make(chan struct{})
	case "instance_mappings":
		if del && r.isChild(key, r.pfx.mappings) {
			if t := r.traces[string(id)]; t != nil {
				t.deleted = true
			}
		}
	}
}

// revArrival is a revision and when the recorder first received it or a
// later one.
type revArrival struct {
	rev int64
	at  time.Time
}

// maxAdvances bounds the advances kept: some 13,000 servers' boots, far
// more than a watch of the member falls behind by.
const maxAdvances = 1 << 16

// arrivalLocked is the time of revision rev, delivered now: the first
// arrival of it or of any later revision. A server's stages are so timed
// in the order etcd made them, whichever of the member's watches delivered
// them: an event a lagging watch delivers late (a claim after its cast,
// on another watch) takes the time the recorder first knew of a later
// revision, not its own arrival, which would put the claim after the
// cast and lose the stage. A single watch delivers in order, and every
// event keeps its own arrival.
//
// The first event of each revision later than all before it is kept
// (advances): both its revision and its arrival grow along the slice,
// and the earliest arrival of a revision at rev or later is the first
// advance at rev or later, since no event before it was past rev.
func (r *Recorder) arrivalLocked(now time.Time, rev int64) time.Time {
	if rev > r.lastRev {
		r.lastRev = rev
		if len(r.advances) == maxAdvances {
			r.advances = append(r.advances[:0], r.advances[maxAdvances/2:]...)
		}
		r.advances = append(r.advances, revArrival{rev: rev, at: now})
		return now
	}
	n := len(r.advances)
	if n == 0 {
		return now
	}
	if last := r.advances[n-1]; rev == last.rev {
		return last.at // the common case: a revision's other events
	}
	// Past the kept advances (a watch behind by more than they span),
	// the oldest kept is the best bound known.
	i := sort.Search(n, func(i int) bool { return r.advances[i].rev >= rev })
	return r.advances[i].at
}

// castRecord says whether value, an instance record in its cell, is the
// one a build cast's transaction writes beside the cast: BUILD and
// spawning. Every build cast of a boot is written so, in the same
// transaction as its instance (the superconductor's hand-off, W4, and
// the cell conductor's reschedule), and the writes between two casts are
// not (a failed build's record is back to scheduling; nothing writes
// between the hand-off and the outcome on the happy path). So a cast is
// a record that says so after one that did not, and its time is the
// cast's revision's, as the cast's own event was. A rename while
// spawning writes the words again after a cast's record: not a cast.
//
// The record is not decoded (recordStatus), and encoding/json writes
// task_state right after status (TestCastRecordReadsTheEncodedInstance
// keeps that so).
func castRecord(value []byte) bool {
	i := bytes.Index(value, statusKeyJSON)
	return i >= 0 && bytes.HasPrefix(value[i:], castRecordJSON)
}

// recordStatus is an instance record's status, read from its bytes (nil
// if it has none): the first "status" member is the record's own, since
// only uuid and name come before it and a string's quotes are escaped,
// and a status is a word with nothing to unescape. Decoding the record
// whole (encoding/json, 1-2 KB) was half the recorder's CPU.
func recordStatus(value []byte) []byte {
	i := bytes.Index(value, statusKeyJSON)
	if i < 0 {
		return nil
	}
	v := value[i+len(statusKeyJSON):]
	if len(v) == 0 || v[0] != '"' {
		return nil
	}
	v = v[1:]
	if j := bytes.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return nil
}

var (
	statusKeyJSON  = []byte(`"status":`)
	castRecordJSON = []byte(`"status":"` + etcdschema.StatusBuild + `","task_state":"` + etcdschema.TaskSpawning + `"`)
)

// recordedInstance is what the recorder reads of an instance record
// (etcdschema.Instance's members of the same names): its status for a
// server's boot, and a followed server's state. The rest of the record
// (times, image, metadata, fault) is skipped, not decoded.
type recordedInstance struct {
	Status        string `json:"status"`
	TaskState     string `json:"task_state"`
	Cell          string `json:"cell"`
	MigrationUUID string `json:"migration_uuid"`
	Flavor        struct {
		Name string `json:"name"`
	} `json:"flavor"`
}

// recorderPrefixes are the key prefixes the recorder matches, made once
// (etcdschema.Keys builds a prefix per call).
type recorderPrefixes struct {
	all, buildRequests, leases, consumers, mappings, cell0 string
}

func newRecorderPrefixes(k etcdschema.Keys) recorderPrefixes {
	return recorderPrefixes{all: k.All(), buildRequests: k.BuildRequests(), leases: k.BuildRequestLeases(),
		consumers: k.Consumers(), mappings: k.InstanceMappings(), cell0: k.CellsPrefix() + "cell0/"}
}

// isChild says whether key is prefix followed by one segment.
func (r *Recorder) isChild(key []byte, prefix string) bool {
	return len(key) > len(prefix) && string(key[:len(prefix)]) == prefix &&
		bytes.IndexByte(key[len(prefix):], '/') < 0
}

// inCell0 says whether key is under cell0, where a server that found no
// host is buried.
func (r *Recorder) inCell0(key []byte) bool {
	return len(key) > len(r.pfx.cell0) && string(key[:len(r.pfx.cell0)]) == r.pfx.cell0
}

// lastSegment is what follows key's last slash.
func lastSegment(key []byte) []byte { return key[bytes.LastIndexByte(key, '/')+1:] }

// keyKinds names keys' families: a key's first segment, or two for
// placement, leases and server groups, with host and cell names made "*".
// The names are made once each: every event is named.
type keyKinds struct {
	all   string // the prefix
	names map[string]string
	buf   []byte // of's scratch
}

func newKeyKinds(all string) keyKinds { return keyKinds{all: all, names: map[string]string{}} }

// of is key's family.
func (kk *keyKinds) of(key []byte) string {
	rel := bytes.TrimPrefix(key, []byte(kk.all))
	seg0, rest, _ := bytes.Cut(rel, []byte{'/'})
	var seg1, seg2 []byte
	seg1, rest, _ = bytes.Cut(rest, []byte{'/'})
	seg2, _, _ = bytes.Cut(rest, []byte{'/'})
	buf := kk.buf[:0]
	switch string(seg0) {
	case "hosts", "cells":
		buf = append(buf, seg0...)
		if seg2 != nil {
			buf = append(append(buf, "/*/"...), seg2...)
		}
	case "placement", "leases", "elections", "members":
		buf = append(buf, seg0...)
		if seg1 != nil {
			buf = append(append(buf, '/'), seg1...)
		}
	case "server_groups":
		buf = append(buf, seg0...)
		if seg2 != nil {
			buf = append(append(buf, "/*/"...), seg2...)
		}
	default:
		buf = append(buf, seg0...)
	}
	kk.buf = buf
	if k, ok := kk.names[string(buf)]; ok {
		return k
	}
	k := string(buf)
	kk.names[k] = k
	return k
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

// late is how many events arrived after one of a later revision.
func (r *Recorder) late() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reordered
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

// writes is what the measured phase wrote. Reading the member, they are
// the changes under the prefix in the revisions (from, to], read from its history; otherwise what the watch
// counted since StartCounting (from and to unused).
func (r *Recorder) writes(from, to int64) (Writes, error) {
	if r.member != nil {
		return r.writesFromHistory(from, to)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Writes{Revisions: r.revs, Puts: map[string]int64{}, Deletes: map[string]int64{}}
	for k, v := range r.puts {
		w.Puts[k] = v
	}
	for k, v := range r.deletes {
		w.Deletes[k] = v
	}
	return w, nil
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

func (f *follow) seen(in *recordedInstance) {
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
