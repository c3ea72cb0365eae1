package quotas

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/berth-project/berth/internal/rawtxn"
)

// Creates checked together: one fence write for several creates of a
// project, and no read before them.
//
// Each create's Guard compares the project's fence and writes it, so two
// creates of one project cannot share an etcd request as two nested
// transactions (etcd refuses two puts of one key in a request, and the
// second's comparison would be against the fence before the first). A
// BatchPlan is one project's share of such a request instead: the
// creates of the project ready together, checked one after another
// against the usage record as if each earlier one had been stored, under
// ONE comparison of the fence (and of the quota set) and ONE fence write
// holding the record plus the sum of their charges. Each create is a
// nested transaction of the share with its own comparisons (its flavor,
// its image, its group), so it is stored or not on its own.
//
// Why the record stays an upper bound (record.go's invariant): the share
// commits only if the fence is at the mod revision M the plan read, so
// nothing grew the usage since M; it writes record + Σ charges, and each
// create adds at most its charge to a count (a create whose own
// comparisons fail adds nothing: the record is then a little high, the
// drift the invariant allows; the next check near a limit counts). The
// limits hold exactly because the creates admitted together fit the
// record together: the k-th is checked against record + the charges of
// the k-1 before it. Two API processes planning the same project both
// compare M; one commits and moves the fence, the other's share fails
// whole and is planned again. Every reader of the record (readState's
// checks, AuditUsage) only relies on it being at least the count.
//
// What is not admitted goes alone, through ReserveServers, exactly as
// before: a create that does not fit the record (it counts, and every
// refusal and range cut comes from a count, in Nova's words), one whose
// user has limits of their own (a per-user count), one into a group with
// a member limit (the members are read), and every create of a project
// whose fence holds no record yet (its first limited check counts).
//
// No read per create: the plan checks against the set and fence as a
// plan of this Store last left them (written by its own committed share,
// or read by the Else of a failed one), and compares both by mod
// revision, so a state gone stale costs the share one failed comparison,
// whose Else reads the fresh state for the next plan, instead of a read
// for every create. A project with nothing limited compares only its
// set, as guardUnchecked compares nothing: its fence carries no record.

// maxRememberedFences bounds the fence states a Store keeps; past it
// they are all forgotten (each costs one read when next planned).
const maxRememberedFences = 100000

// fenceMemory is the set and fence of each project as the last plan
// left them.
type fenceMemory struct {
	mu sync.Mutex
	m  map[string]fenceState
}

// BatchPlan is one project's share of a request that stores several
// creates (see above). Its comparisons and operations are etcd's messages
// as built (package rawtxn): a share is in every batch of creates, and
// clientv3's builders clone each comparison by reflection again at If,
// at OpTxn and when the nested Op becomes a request.
type BatchPlan struct {
	Project string
	// Alone says, for each request planned, that it was not admitted: it
	// must be checked by ReserveServers and stored in a transaction of
	// its own.
	Alone []bool
	// Cmps guard the share: the project's quota set (and fence, when a
	// limit is checked) as the plan read them.
	Cmps []*etcdserverpb.Compare
	// Ops is the fence write (nil when no request was admitted).
	Ops []*etcdserverpb.RequestOp
	// Refresh reads the set and fence for the share's Else branch: a
	// failed share hands their answers to PlanFailed.
	Refresh []*etcdserverpb.RequestOp

	// next is the fence state once the share commits (fenceMod unknown
	// until then).
	next fenceState
	// fenced says Cmps compare the fence, at fenceMod.
	fenced   bool
	fenceMod int64
}

// Admitted reports whether any request of the plan was admitted.
func (p *BatchPlan) Admitted() bool { return len(p.Ops) > 0 }

// PlanServers plans project's share for reqs (creates of exactly Max
// servers each; Min is not used: a create that needs a range cut goes
// alone). requestID is written in the fence.
func (s *Store) PlanServers(ctx context.Context, project, requestID string, reqs []ServerRequest) (*BatchPlan, error) {
	st, err := s.rememberedState(ctx, project)
	if err != nil {
		return nil, err
	}
	p := &BatchPlan{Project: project, Alone: make([]bool, len(reqs)),
		Refresh: []*etcdserverpb.RequestOp{rawtxn.Get(s.keys.QuotaSet(project)), rawtxn.Get(s.keys.QuotaFence(project))}}
	lim := s.merge(st.set, "")
	limited := lim[Instances] >= 0 || lim[Cores] >= 0 || lim[RAM] >= 0
	record, recorded := st.recorded()
	sum := charge{}
	admitted := 0
	for i, r := range reqs {
		n := int64(r.Max)
		c := charge{instances: n, cores: n * r.VCPUs, ram: n * r.RAMMB}
		switch {
		// The user's own limits (serverLimits' condition) need a count.
		case r.User != "" && userLimitsOwn(st.set, r.User, Instances, Cores, RAM), r.Group != "" && lim[ServerGroupMembers] >= 0, limited && !recorded:
			p.Alone[i] = true
		case limited && !(within(lim[Instances], record.Instances+sum.instances, c.instances) &&
			within(lim[Cores], record.Cores+sum.cores, c.cores) && within(lim[RAM], record.RAM+sum.ram, c.ram)):
			p.Alone[i] = true
		default:
			admitted++
			sum.instances, sum.cores, sum.ram = sum.instances+c.instances, sum.cores+c.cores, sum.ram+c.ram
		}
	}
	if admitted < len(reqs) {
		// Those going alone move the fence, and a record they reset
		// (a count) would not be seen by a plan still remembering
		// none: read the state again next time.
		s.ForgetFence(project)
	}
	if admitted == 0 {
		return p, nil
	}
	p.Cmps = []*etcdserverpb.Compare{rawtxn.ModRevisionIs(s.keys.QuotaSet(project), st.setMod)}
	p.next = fenceState{set: st.set, setMod: st.setMod}
	// What guardRecorded or guardUnchecked would compare and write.
	var fence fenceWrite
	if limited {
		fence, p.next.usage = s.recordedFence(project, requestID, st, sum)
		p.fenced, p.fenceMod = true, st.fenceMod
	} else {
		fence = s.uncheckedFence(project, requestID)
	}
	cmp, put := fence.messages()
	if cmp != nil {
		p.Cmps = append(p.Cmps, cmp)
	}
	p.Ops = []*etcdserverpb.RequestOp{put}
	return p, nil
}

// PlanCommitted records that p's share committed at rev: the next plan
// starts from the fence it wrote.
func (s *Store) PlanCommitted(p *BatchPlan, rev int64) {
	next := p.next
	next.fenceMod, next.rev = rev, rev
	s.remember(p.Project, &next)
}

// PlanFailed records the set and fence that p's share's Else read (the
// responses of p.Refresh, in order): the share's comparisons failed, and
// the next plan starts from them. moved reports whether the set or the
// fence the plan compared did move (true too when the reads cannot
// tell); false means another of the share's comparisons failed.
func (s *Store) PlanFailed(p *BatchPlan, refresh []*etcdserverpb.ResponseOp, rev int64) (moved bool) {
	if len(refresh) != 2 {
		s.remember(p.Project, nil)
		return true
	}
	st := fenceState{rev: rev}
	if err := st.decode(refresh[0].GetResponseRange().GetKvs(), refresh[1].GetResponseRange().GetKvs()); err != nil {
		s.remember(p.Project, nil)
		return true
	}
	s.remember(p.Project, &st)
	return st.setMod != p.next.setMod || (p.fenced && st.fenceMod != p.fenceMod)
}

// ForgetFence drops what the plans remember of project (its share's
// outcome is unknown): the next plan reads it.
func (s *Store) ForgetFence(project string) { s.remember(project, nil) }

// rememberedState is project's state as the plans left it, or read.
func (s *Store) rememberedState(ctx context.Context, project string) (fenceState, error) {
	s.fences.mu.Lock()
	st, ok := s.fences.m[project]
	s.fences.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := s.readState(ctx, project, "")
	if err != nil {
		return fenceState{}, err
	}
	s.remember(project, &st)
	return st, nil
}

// remember keeps st as project's state (nil: forget it).
func (s *Store) remember(project string, st *fenceState) {
	s.fences.mu.Lock()
	defer s.fences.mu.Unlock()
	if st == nil {
		delete(s.fences.m, project)
		return
	}
	if s.fences.m == nil || len(s.fences.m) >= maxRememberedFences {
		s.fences.m = map[string]fenceState{}
	}
	s.fences.m[project] = *st
}
