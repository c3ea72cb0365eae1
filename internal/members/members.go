// Package members is discovery: a running server role registers itself
// under /members/<role>/<id>, bound to an etcd session lease, and callers
// follow the prefix to find who is there. A process that dies stops being
// listed within its session TTL; one that stops cleanly revokes at once.
package members

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
	"github.com/berth-project/berth/internal/informer"
)

// Registration keeps one member's key in etcd for as long as it runs.
type Registration struct {
	Cli  *clientv3.Client
	Keys etcdschema.Keys
	Role string
	ID   string
	URL  string
	TTL  time.Duration
	Log  hclog.Logger

	registered chan struct{}
	once       sync.Once
}

// Registered is closed once the key was first written.
func (r *Registration) Registered() <-chan struct{} {
	r.once.Do(func() { r.registered = make(chan struct{}) })
	return r.registered
}

// Run writes the registration under a session lease and writes it again
// under a new session whenever the lease is lost (etcd unreachable for
// longer than the TTL), until ctx ends; then it revokes the lease so
// callers stop choosing this member at once.
func (r *Registration) Run(ctx context.Context) error {
	r.Registered()
	if r.ID == "" || strings.Contains(r.ID, "/") {
		return fmt.Errorf("member id %q of role %s: must be one key segment (no \"/\")", r.ID, r.Role)
	}
	first := true
	ttl := int(r.TTL / time.Second)
	if ttl < 1 {
		ttl = 1
	}
	backoff := backoff.Default()
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(r.Cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err == nil {
			m := &etcdschema.Member{Role: r.Role, ID: r.ID, URL: r.URL, Started: time.Now().UTC()}
			_, err = r.Cli.Put(ctx, r.Keys.Member(r.Role, r.ID), etcdschema.MustEncode(m), clientv3.WithLease(sess.Lease()))
			if err != nil {
				sess.Close()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.Log.Warn("could not register member, retrying", "role", r.Role, "id", r.ID, "error", err, "backoff", backoff.Current())
			backoff.Wait(ctx)
			continue
		}
		backoff.Reset()
		if first {
			close(r.registered)
			first = false
		}
		r.Log.Debug("registered", "role", r.Role, "id", r.ID, "url", r.URL)
		select {
		case <-ctx.Done():
			// Revoke with a fresh context: ours is done.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = r.Cli.Revoke(rctx, sess.Lease())
			cancel()
		case <-sess.Done():
			r.Log.Warn("member lease lost, registering again", "role", r.Role, "id", r.ID)
		}
	}
	return nil
}

// Member is one registration as seen by a watcher.
type Member struct {
	ID  string
	URL string
}

// Watcher follows one role's registrations.
type Watcher struct {
	keys etcdschema.Keys
	role string
	inf  *informer.Informer
	log  hclog.Logger

	mu      sync.RWMutex
	members map[string]Member
}

// NewWatcher returns a watcher of role's members; Run starts it.
func NewWatcher(cli *clientv3.Client, keys etcdschema.Keys, role string, log hclog.Logger) *Watcher {
	w := &Watcher{keys: keys, role: role, log: log, members: map[string]Member{}}
	w.inf = informer.New(cli, keys.Members(role), w, log)
	return w
}

// Run follows etcd until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.inf.Run(ctx) }

// WaitSynced blocks until the first list is in.
func (w *Watcher) WaitSynced(ctx context.Context) error { return w.inf.WaitSynced(ctx) }

// List returns the members, sorted by id.
func (w *Watcher) List() []Member {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]Member, 0, len(w.members))
	for _, m := range w.members {
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Reset implements informer.Handler.
func (w *Watcher) Reset(kvs []informer.Event, _ int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.members = map[string]Member{}
	for _, kv := range kvs {
		w.applyLocked(kv)
	}
}

// Apply implements informer.Handler.
func (w *Watcher) Apply(evs []informer.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs {
		w.applyLocked(ev)
	}
}

func (w *Watcher) applyLocked(ev informer.Event) {
	id, ok := etcdschema.LastSegment(ev.Key, w.keys.Members(w.role))
	if !ok {
		return
	}
	if ev.Deleted {
		delete(w.members, id)
		return
	}
	var m etcdschema.Member
	if err := etcdschema.Decode(ev.Key, ev.Value, &m); err != nil {
		// A member we cannot read is one we cannot call; skip it, loudly.
		w.log.Warn("ignoring unreadable member registration", "role", w.role, "id", id, "error", err)
		delete(w.members, id)
		return
	}
	w.members[id] = Member{ID: id, URL: m.URL}
}

// Count is how many members are registered.
func (w *Watcher) Count() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.members)
}

// String names a member for logs.
func (m Member) String() string { return fmt.Sprintf("%s (%s)", m.ID, m.URL) }
