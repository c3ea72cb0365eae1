package scheduler

import (
	"context"
	"slices"

	"github.com/berth-project/berth/placement"
)

// Cycle is the scratch state of one select_destinations call, kept apart
// from the request as kube-scheduler keeps its CycleState apart from the
// pod: the server group read for this request, the instance being placed,
// what has been claimed so far and what each filter turned down. The
// RequestSpec stays as the caller sent it (a conductor may send it again
// to another scheduler); filters and weighers read both through the cycle.
//
// A cycle belongs to one call on one goroutine. A sampled request that
// finds no valid host is tried again with a new cycle.
type Cycle struct {
	// Spec is the request: read-only.
	Spec *RequestSpec
	// Group is the server group named by the group hint, read from etcd
	// for this request (Nova's setup_instance_group), with this request's
	// picks placed into it as they are made; nil without a group hint.
	Group *GroupInfo
	// Instance is the instance being placed at the current pick (Nova sets
	// spec.instance_uuid per instance), and Index its position in
	// Spec.InstanceUUIDs.
	Instance string
	Index    int
	// log is the request's logger (selectOnce's log).
	log requestLog

	// claims are this request's claims so far, in instance order, each
	// with the etcd revision it wrote, so abort frees exactly those.
	claims []claim
	// claimBuf holds the usual request's one claim without an
	// allocation of its own (newCycle points claims at it).
	claimBuf [1]claim
	// placed maps each instance whose claim took a server group place to
	// its host, so abort gives the places back.
	placed map[string]string
	// removed tallies, per filter name, the hosts it turned down (nil
	// until one does).
	removed map[string]*FilterCount
	// requested is why the requested host (requested_destination) was
	// turned down, the first time it was.
	requested *HostRejection
	// requestedRes is the request's resources of the compute node, worked
	// out on first use (the legacy resource filters).
	requestedRes map[string]int64
	aborted      bool

	// What a failure is explained from (explain.go), kept as the stages
	// make them: the placement query, its candidates, the joined hosts,
	// and whether the candidates were a sample (then a failure is tried
	// again, unexplained).
	query   placement.CandidateQuery
	cands   []placement.Candidate
	hosts   []*HostState
	sampled bool

	// fallback is set when Placement had no provider at all and the
	// request is scheduled over the host manager's hosts (fallback.go).
	fallback fallbackState

	// scratch holds the join's arrays (scratch.go), taken on first use
	// and given back by release when the call is over.
	scratch *joinScratch
}

// joinScratch is the cycle's join scratch, taken from the pool on first
// use.
func (c *Cycle) joinScratch() *joinScratch {
	if c.scratch == nil {
		c.scratch = getJoinScratch()
	}
	return c.scratch
}

// release gives the cycle's scratch back once nothing of the call reads
// its host states any more (selectOnce defers it). The cycle must not be
// used afterwards.
func (c *Cycle) release() {
	if c.scratch != nil {
		c.scratch.release()
		c.scratch = nil
	}
	c.hosts, c.cands = nil, nil // both in the scratch's arrays
}

// claim is one instance's claim and the revision that wrote it.
type claim struct {
	instance string
	rev      int64
}

// maxSampleReasons is how many hosts' reasons a filter's count keeps: a
// few say what is wrong; a thousand say it a thousand times.
const maxSampleReasons = 3

// newCycle starts the cycle of one call for spec, at its first instance.
func newCycle(spec *RequestSpec) *Cycle {
	// removed is made by the first rejection: most requests' filters
	// reject no host.
	c := &Cycle{Spec: spec}
	c.claims = c.claimBuf[:0]
	if len(spec.InstanceUUIDs) > 0 {
		c.Instance = spec.InstanceUUIDs[0]
	}
	return c
}

// at moves the cycle to the instance at index i.
func (c *Cycle) at(i int) {
	c.Index, c.Instance = i, c.Spec.InstanceUUIDs[i]
}

// reject records that filter turned host h down, with st's reason for the
// first few hosts and for the requested host.
func (c *Cycle) reject(filter string, h *HostState, st Status) {
	fc := c.removed[filter]
	if fc == nil {
		if c.removed == nil {
			c.removed = map[string]*FilterCount{}
		}
		fc = &FilterCount{Filter: filter}
		c.removed[filter] = fc
	}
	fc.Removed++
	if len(fc.Reasons) < maxSampleReasons {
		fc.Reasons = append(fc.Reasons, h.Host+": "+st.Reason(h, c))
	}
	if c.requested == nil && h.Host == c.Spec.RequestedDestination.host() {
		c.rejectRequested(h.Host, filter, st.Reason(h, c))
	}
}

// rejectRequested records why the requested host was turned down, if host
// is it and nothing has said so yet.
func (c *Cycle) rejectRequested(host, by, reason string) {
	if c.requested != nil || host == "" || host != c.Spec.RequestedDestination.host() {
		return
	}
	c.requested = &HostRejection{Host: host, By: by, Reason: reason}
}

// counts is what each filter removed, in filter order (each name once).
func (c *Cycle) counts(filters []Filter) []FilterCount {
	var out []FilterCount
	for _, f := range filters {
		if slices.ContainsFunc(out, func(fc FilterCount) bool { return fc.Filter == f.Name() }) {
			continue
		}
		fc := FilterCount{Filter: f.Name()}
		if got := c.removed[f.Name()]; got != nil {
			fc = *got
		}
		out = append(out, fc)
	}
	return out
}

// noValidHost is the NoValidHostError for reason, with what the filters
// removed and why the requested host was turned down.
func (c *Cycle) noValidHost(filters []Filter, reason string) *NoValidHostError {
	return &NoValidHostError{Reason: reason, Removed: c.counts(filters), RequestedHost: c.requested}
}

// claimed records the claim of the current instance on host, and its
// server group place.
func (c *Cycle) claimed(host string, rev int64) {
	c.claims = append(c.claims, claim{instance: c.Instance, rev: rev})
	if c.Group != nil {
		c.Group.place(host, c.Instance)
		if c.placed == nil {
			c.placed = map[string]string{}
		}
		c.placed[c.Instance] = host
	}
}

// abort undoes what the request took when it cannot be placed whole: it
// frees every claim made (each guarded by its revision, see rollback) and
// gives back the server group places. It acts once, however often called.
func (c *Cycle) abort(ctx context.Context, s *Scheduler) {
	if c.aborted {
		return
	}
	c.aborted = true
	s.rollback(ctx, c.claims)
	s.releaseGroupPlaces(ctx, c.Group, c.placed)
}
