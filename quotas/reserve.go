package quotas

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// OverQuotaError is a create the project's quotas refuse, in Nova's
// words (the API answers it 403).
type OverQuotaError struct{ Message string }

func (e *OverQuotaError) Error() string { return e.Message }

// Nova's refusals of a server group create and of a server joining a
// full group (nova/api/openstack/compute/server_groups.py,
// nova/exception.py's "too many servers in group").
const (
	msgTooManyGroups  = "Quota exceeded, too many server groups."
	msgTooManyMembers = "Quota exceeded, too many servers in group"
)

// Guard is what a create adds to the transaction that stores it: the
// comparisons that fail if the usage it was checked against changed,
// and the fence write that makes every other check see it changed.
type Guard struct {
	Cmps []clientv3.Cmp
	Ops  []clientv3.Op
}

// ServerRequest is a create of between Min and Max servers of one
// flavor in Project by User (in Group, when not "").
type ServerRequest struct {
	Project, User, Group string
	Min, Max             int
	VCPUs, RAMMB         int64
	RequestID            string
}

// ReserveServers checks a create of servers against the project's
// quotas (and the user's, when os-quota-sets set the user's instances,
// cores or ram, as Nova checks them) and says how many it may create
// (Max, or fewer down to Min as Nova's check_num_instances_quota allows)
// with the Guard to commit them under. A commit the Guard fails must
// call ReserveServers again. A create that fits the project's usage
// record is not counted (record.go).
func (s *Store) ReserveServers(ctx context.Context, r ServerRequest) (int, Guard, error) {
	st, err := s.readState(ctx, r.Project, r.Group)
	if err != nil {
		return 0, Guard{}, err
	}
	lim, userLim := s.serverLimits(st.set, r.User)
	counted := lim[Instances] >= 0 || lim[Cores] >= 0 || lim[RAM] >= 0 ||
		(userLim != nil && (userLim[Instances] >= 0 || userLim[Cores] >= 0 || userLim[RAM] >= 0)) ||
		(r.Group != "" && lim[ServerGroupMembers] >= 0)
	if !counted {
		// Nothing to check, but the fence still moves: a check that
		// counted before this create must count again.
		return r.Max, s.guardUnchecked(r.Project, r.RequestID), nil
	}
	servers := func(n int) charge {
		return charge{instances: int64(n), cores: int64(n) * r.VCPUs, ram: int64(n) * r.RAMMB}
	}
	if u, ok := st.recorded(); ok && userLim == nil {
		// The record bounds the count: all Max servers fitting it is the
		// count's answer too.
		if r.Group != "" && lim[ServerGroupMembers] >= 0 {
			if u.GroupMembers, err = s.groupMembers(ctx, st.members, st.rev); err != nil {
				return 0, Guard{}, err
			}
		}
		if n, err := instancesAllowed(lim, nil, u, r); err == nil && n == r.Max &&
			(r.Group == "" || within(lim[ServerGroupMembers], u.GroupMembers, int64(n))) {
			return n, s.memberGuard(s.guardRecorded(r.Project, r.RequestID, st, servers(n)), r.Group, st.rev), nil
		}
	}
	user := ""
	if userLim != nil {
		user = r.User
	}
	u, rev, err := s.CountUser(ctx, r.Project, user, r.Group)
	if err != nil {
		return 0, Guard{}, err
	}
	// The limits as of the count.
	set, _, err := s.readSet(ctx, r.Project, rev)
	if err != nil {
		return 0, Guard{}, err
	}
	lim, userLim = s.serverLimits(set, r.User)
	if userLim != nil && u.User == nil {
		// The user's limits appeared between the two reads: count again.
		return s.ReserveServers(ctx, r)
	}
	n, err := instancesAllowed(lim, userLim, u, r)
	if err != nil {
		return 0, Guard{}, err
	}
	if r.Group != "" && !within(lim[ServerGroupMembers], u.GroupMembers, int64(n)) {
		return 0, Guard{}, &OverQuotaError{msgTooManyMembers}
	}
	project := u
	project.User = nil
	return n, s.memberGuard(s.guardCounted(r.Project, r.RequestID, project, rev, servers(n)), r.Group, rev), nil
}

// memberGuard is g with, for a create into group, the comparison that no
// member joined after rev: members come from any project's creates,
// which move other fences.
func (s *Store) memberGuard(g Guard, group string, rev int64) Guard {
	if group != "" {
		g.Cmps = append(g.Cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.ServerGroupMembers(group)), "<", rev+1).
			WithPrefix())
	}
	return g
}

// serverLimits are the project's limits and, when user set instances,
// cores or ram of its own, the user's (nil otherwise: Nova then skips
// the per-user count).
func (s *Store) serverLimits(set *etcdschema.QuotaSet, user string) (project, users Limits) {
	project = s.merge(set, "")
	if user == "" {
		return project, nil
	}
	for _, k := range []string{Instances, Cores, RAM} {
		if _, ok := set.Users[user][k]; ok {
			return project, s.merge(set, user)
		}
	}
	return project, nil
}

// ReserveServerGroup checks a server group create against project's
// server_groups quota.
func (s *Store) ReserveServerGroup(ctx context.Context, project, requestID string) (Guard, error) {
	st, err := s.readState(ctx, project, "")
	if err != nil {
		return Guard{}, err
	}
	lim := s.merge(st.set, "")
	if lim[ServerGroups] < 0 {
		return s.guardUnchecked(project, requestID), nil
	}
	group := charge{groups: 1}
	if u, ok := st.recorded(); ok && within(lim[ServerGroups], u.ServerGroups, 1) {
		return s.guardRecorded(project, requestID, st, group), nil
	}
	u, rev, err := s.Count(ctx, project, "")
	if err != nil {
		return Guard{}, err
	}
	set, _, err := s.readSet(ctx, project, rev)
	if err != nil {
		return Guard{}, err
	}
	if !within(s.merge(set, "")[ServerGroups], u.ServerGroups, 1) {
		return Guard{}, &OverQuotaError{msgTooManyGroups}
	}
	return s.guardCounted(project, requestID, u, rev, group), nil
}

// instancesAllowed is nova.compute.utils.check_num_instances_quota: how
// many of Min..Max servers fit the instances, cores and ram quotas of
// the project (lim) and, when not nil, of the user (userLim, against
// u.User), or Nova's TooManyInstances words. As in Nova, once a user's
// limits are checked the words quote the user's usage, and the user's
// limits when the user's quota is the one exceeded.
func instancesAllowed(lim, userLim Limits, u Usage, r ServerRequest) (int, error) {
	max := int64(r.Max)
	deltas := map[string]int64{Instances: max, Cores: max * r.VCPUs, RAM: max * r.RAMMB}
	var overs []string
	overUser := false
	for _, k := range []string{Instances, Cores, RAM} {
		switch {
		case !within(lim[k], u.Of(k), deltas[k]):
			overs = append(overs, k)
		case userLim != nil && !within(userLim[k], u.User.Of(k), deltas[k]):
			overs = append(overs, k)
			overUser = true
		}
	}
	if len(overs) == 0 {
		return r.Max, nil
	}
	sort.Strings(overs)
	quotas, usages := lim, u
	if overUser {
		quotas = userLim
	}
	if userLim != nil {
		usages = *u.User
	}
	// get_headroom: an unlimited cores (ram) quota's headroom follows the
	// instances headroom.
	headroom := map[string]int64{}
	for k := range deltas {
		headroom[k] = quotas[k] - usages.Of(k)
	}
	for _, k := range []string{Cores, RAM} {
		if quotas[k] == Unlimited {
			headroom[k] = headroom[Instances]
			if deltas[k] != 0 {
				headroom[k] = headroom[Instances] * deltas[k] / deltas[Instances]
			}
		}
	}
	allowed := headroom[Instances]
	if r.VCPUs > 0 {
		allowed = min(allowed, floorDiv(headroom[Cores], r.VCPUs))
	}
	if r.RAMMB > 0 {
		allowed = min(allowed, floorDiv(headroom[RAM], r.RAMMB))
	}
	if allowed > 0 && int64(r.Min) <= allowed && allowed <= max {
		return instancesAllowed(lim, userLim, u, ServerRequest{Min: r.Min, Max: int(allowed), VCPUs: r.VCPUs, RAMMB: r.RAMMB})
	}
	requested := map[string]string{Instances: strconv.Itoa(r.Min), Cores: strconv.FormatInt(deltas[Cores], 10),
		RAM: strconv.FormatInt(deltas[RAM], 10)}
	if r.Min != r.Max {
		requested[Instances] = fmt.Sprintf("%d-%d", r.Min, r.Max)
	}
	var reqs, used, allowedS []string
	for _, k := range overs {
		reqs = append(reqs, requested[k])
		used = append(used, strconv.FormatInt(usages.Of(k), 10))
		allowedS = append(allowedS, strconv.FormatInt(quotas[k], 10))
	}
	o := strings.Join(overs, ", ")
	return 0, &OverQuotaError{fmt.Sprintf("Quota exceeded for %s: Requested %s, but already used %s of %s %s",
		o, strings.Join(reqs, ", "), strings.Join(used, ", "), strings.Join(allowedS, ", "), o)}
}

// floorDiv is Python's // on integers.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// MoveRequest is a move of one of Project's servers, owned by User:
// Cores more cores and RAMMB more MiB of RAM to check (a resize's or a
// revert's upsize delta, Nova's upsize_quota_delta: each only when
// positive), and what the move holds while in flight beyond what the
// server held before (HeldCores, HeldRAMMB: what a count adds for it,
// Count's moves), which the usage record must cover.
type MoveRequest struct {
	Project, User        string
	Cores, RAMMB         int64
	HeldCores, HeldRAMMB int64
	RequestID            string
}

// ReserveMove is compute.API._check_quota_for_upsize with the old quota
// system: Quotas.check_deltas of the cores and ram deltas against the
// project's limits and the user's (which default to the project's),
// with the Guard to commit the move under (a commit the Guard fails
// must call ReserveMove again). A move that is not an upsize is not
// checked, as in Nova, but its Guard still adds its hold to the usage
// record (record.go). An upsize that fits the record is not counted.
func (s *Store) ReserveMove(ctx context.Context, r MoveRequest) (Guard, error) {
	hold := charge{cores: r.HeldCores, ram: r.HeldRAMMB}
	if r.Cores <= 0 && r.RAMMB <= 0 && hold == (charge{}) {
		return Guard{}, nil // nothing to check, and the count does not grow
	}
	st, err := s.readState(ctx, r.Project, "")
	if err != nil {
		return Guard{}, err
	}
	lim, userLim := s.merge(st.set, ""), s.merge(st.set, r.User)
	recorded, ok := st.recorded()
	if !upsizeLimited(lim, userLim, r) {
		// Unlimited cores and ram (the project's and the user's), or no
		// upsize, cannot refuse the move: no count.
		if ok {
			return s.guardRecorded(r.Project, r.RequestID, st, hold), nil
		}
		return s.guardUnchecked(r.Project, r.RequestID), nil
	}
	if ok && !userLimitsOwn(st.set, r.User, Cores, RAM) && deltasAllowed(lim, lim, recorded, r) == nil {
		// Within the record, so within the count; the user's limits are
		// the project's, which the project's usage already meets.
		return s.guardRecorded(r.Project, r.RequestID, st, hold), nil
	}
	u, rev, err := s.CountUser(ctx, r.Project, r.User, "")
	if err != nil {
		return Guard{}, err
	}
	set, _, err := s.readSet(ctx, r.Project, rev)
	if err != nil {
		return Guard{}, err
	}
	lim, userLim = s.merge(set, ""), s.merge(set, r.User)
	if err := deltasAllowed(lim, userLim, u, r); err != nil {
		return Guard{}, err
	}
	project := u
	project.User = nil
	return s.guardCounted(r.Project, r.RequestID, project, rev, hold), nil
}

// userLimitsOwn reports whether os-quota-sets set any of resources for
// user itself.
func userLimitsOwn(set *etcdschema.QuotaSet, user string, resources ...string) bool {
	for _, k := range resources {
		if _, ok := set.Users[user][k]; ok {
			return true
		}
	}
	return false
}

// upsizeLimited says whether a limit (the project's or the user's) caps
// a resource the move grows.
func upsizeLimited(lim, userLim Limits, r MoveRequest) bool {
	return (r.Cores > 0 && (lim[Cores] >= 0 || userLim[Cores] >= 0)) ||
		(r.RAMMB > 0 && (lim[RAM] >= 0 || userLim[RAM] >= 0))
}

// deltasAllowed is limit_check_project_and_user over the resize's
// deltas, worded as _check_quota_for_upsize words TooManyInstances: the
// over resources sorted, the deltas requested, the user's usage (check
// deltas reports the user's count when it counted one) and the limits
// of whichever quota was exceeded.
func deltasAllowed(lim, userLim Limits, u Usage, r MoveRequest) error {
	deltas := map[string]int64{}
	if r.Cores > 0 {
		deltas[Cores] = r.Cores
	}
	if r.RAMMB > 0 {
		deltas[RAM] = r.RAMMB
	}
	mine := u
	if u.User != nil {
		mine = *u.User
	}
	var overs []string
	quotas := lim
	for _, k := range []string{Cores, RAM} {
		d, ok := deltas[k]
		if !ok {
			continue
		}
		switch {
		case !within(lim[k], u.Of(k), d):
			overs = append(overs, k)
		case !within(userLim[k], mine.Of(k), d):
			overs = append(overs, k)
			quotas = userLim
		}
	}
	if len(overs) == 0 {
		return nil
	}
	var reqs, used, allowed []string
	for _, k := range overs {
		reqs = append(reqs, strconv.FormatInt(deltas[k], 10))
		used = append(used, strconv.FormatInt(mine.Of(k), 10))
		allowed = append(allowed, strconv.FormatInt(quotas[k], 10))
	}
	o := strings.Join(overs, ", ")
	return &OverQuotaError{fmt.Sprintf("Quota exceeded for %s: Requested %s, but already used %s of %s %s",
		o, strings.Join(reqs, ", "), strings.Join(used, ", "), strings.Join(allowed, ", "), o)}
}
