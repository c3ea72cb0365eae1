package scheduler

import (
	"context"
	"math/rand/v2"
	"net/http"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/members"
)

// Role is the name schedulers register and elect under
// (/members/scheduler/<id>, /elections/scheduler).
const Role = "scheduler"

// Selector is anything that answers select_destinations: an in-process
// Scheduler or a Remote.
type Selector interface {
	SelectDestinations(ctx context.Context, spec *RequestSpec) ([][]etcdschema.Selection, error)
}

// Target is one scheduler a caller may ask, with a name for logs.
type Target struct {
	Name string
	Selector
}

// Pool is how a superconductor finds schedulers: the registrations under
// /members/scheduler/, followed by watch, plus an optional scheduler in
// the same process.
type Pool struct {
	local   Selector
	localID string
	members *members.Watcher
	client  *http.Client
}

// NewPool returns a pool over the registrations w follows. local, when
// not nil, is a scheduler in this process registered as localID: it is
// always tried first (no HTTP hop, and it shares this process's placement
// index), and its own registration is not called over HTTP. w may be nil
// for a process that only has its local scheduler.
func NewPool(local Selector, localID string, w *members.Watcher, client *http.Client) *Pool {
	if client == nil {
		client = http.DefaultClient
	}
	return &Pool{local: local, localID: localID, members: w, client: client}
}

// Targets lists the schedulers to try, in order: the local one, then every
// registered remote in random order, so that callers spread their load and
// a dead scheduler is not everyone's first choice.
func (p *Pool) Targets() []Target {
	var out []Target
	if p.local != nil {
		out = append(out, Target{Name: "local", Selector: p.local})
	}
	if p.members == nil {
		return out
	}
	ms := p.members.List()
	rand.Shuffle(len(ms), func(a, b int) { ms[a], ms[b] = ms[b], ms[a] })
	for _, m := range ms {
		if m.ID == p.localID || m.URL == "" {
			continue
		}
		out = append(out, Target{Name: m.String(), Selector: &Remote{URL: m.URL, Client: p.client}})
	}
	return out
}
