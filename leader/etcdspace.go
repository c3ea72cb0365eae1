package leader

// etcd space: the leader's two duties that keep etcd's backend file from
// growing until the quota stops every write.
//
// Compaction (auto_compaction_retention) bounds etcd's live data, but the
// bbolt file never shrinks by itself: the pages compaction frees are
// reused, so a burst leaves the file at its peak. Only a defragmentation
// gives them back, and it blocks the member it runs on (no reads, no
// writes, no heartbeats answered) for as long as it copies the file. So:
//
//   - one member at a time, never two: a cluster of three keeps its
//     quorum while one is busy, and the mutex below also keeps the alarm
//     recovery from defragmenting while the periodic duty does;
//   - the raft leader last: defragmenting it stalls every write and may
//     cost an election, so it is done once, after the followers;
//   - only while every member answers its status and knows a leader:
//     taking a member away from a cluster already one short loses quorum.
//
// The NOSPACE alarm is raised by etcd when a write would take the backend
// past quota-backend-bytes; from then on etcd refuses every write (puts,
// writing transactions, lease grants) until someone disarms it. The
// recovery is etcd's documented one: compact to the current revision,
// defragment every member, disarm.
//
// Fencing. A defragmentation, a compaction and a disarm are maintenance
// calls, not transactions, so they cannot carry the fence's compare. Each
// is preceded by a read-only transaction that compares the fence
// (Fence.Holds), which etcd answers even under NOSPACE (it costs no
// quota). A deposed leader therefore stops before its next call; the
// window left is the one between that check and the call, a few
// milliseconds against an election TTL of seconds, and the worst a stale
// call does is defragment a member once more.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/metrics"
)

// The etcd space duties' names (berth_scheduler_duty_runs_total{duty}).
const (
	DutyEtcdDefrag = "etcd_defrag"
	DutyEtcdAlarms = "etcd_alarms"
)

// statusTimeout bounds one member's status: a member that does not
// answer within it counts as down.
const statusTimeout = 5 * time.Second

// defragTimeout bounds one member's defragmentation: etcd copies the
// whole live data into a new file, tens of seconds for gigabytes.
const defragTimeout = 10 * time.Minute

// EtcdSpaceConfig configures the etcd space duties.
type EtcdSpaceConfig struct {
	Client *clientv3.Client
	// Maintenance is the maintenance API the duties call; nil means
	// Client's. Tests wrap it to see which member is defragmented when.
	Maintenance clientv3.Maintenance
	// Defrag turns the periodic defragmentation on; the NOSPACE duty
	// runs either way.
	Defrag bool
	// DefragInterval is how often the members' sizes are looked at.
	DefragInterval time.Duration
	// A member is defragmented when its file is at least DefragRatio
	// times its live data and at least DefragMinBytes larger.
	DefragRatio    float64
	DefragMinBytes int64
	// AlarmInterval is how often the alarms are listed.
	AlarmInterval time.Duration
	Metrics       *metrics.Metrics
	Log           hclog.Logger
}

// EtcdSpaceDuties returns the leader's etcd space duties: the periodic
// defragmentation (when Defrag) and the NOSPACE alarm's watch and
// recovery.
func EtcdSpaceDuties(c EtcdSpaceConfig) []Duty {
	if c.Maintenance == nil {
		c.Maintenance = c.Client.Maintenance
	}
	s := &etcdSpace{EtcdSpaceConfig: c}
	var out []Duty
	if c.Defrag {
		out = append(out, Duty{Name: DutyEtcdDefrag, Interval: c.DefragInterval, Run: s.defragDuty})
	}
	return append(out, Duty{Name: DutyEtcdAlarms, Interval: c.AlarmInterval, Run: s.alarmDuty})
}

type etcdSpace struct {
	EtcdSpaceConfig
	// defragging is held for every defragmentation pass, so the two
	// duties never defragment two members at once.
	defragging sync.Mutex
}

// Holds reports whether the fence still holds, by a read-only transaction
// that compares it (etcd answers it under NOSPACE: it writes nothing). It
// returns ErrNotLeader when it does not, and the store's revision.
func (f Fence) Holds(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Txn(ctx).If(f.Cmp()).Commit()
	if err != nil {
		return 0, fmt.Errorf("check the leader fence: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrNotLeader
	}
	return resp.Header.Revision, nil
}

// member is one etcd member's status as the duties see it.
type member struct {
	id       uint64
	name     string
	endpoint string
	status   *clientv3.StatusResponse
}

func (m member) leads() bool { return m.status.Leader == m.status.Header.GetMemberId() }

// members reads every member's status from its own client URL. It fails
// when a member does not answer: the duties touch no member while the
// cluster is short of one.
func (s *etcdSpace) members(ctx context.Context) ([]member, error) {
	list, err := s.Client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	var out []member
	for _, m := range list.Members {
		if len(m.ClientURLs) == 0 {
			return nil, fmt.Errorf("etcd member %x (%s) has not started: the cluster is not whole", m.ID, m.Name)
		}
		ep := m.ClientURLs[0]
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := s.Maintenance.Status(sctx, ep)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("status of etcd member %s (%s): %w", m.Name, ep, err)
		}
		if st.Leader == 0 {
			return nil, fmt.Errorf("etcd member %s (%s) knows no raft leader", m.Name, ep)
		}
		out = append(out, member{id: m.ID, name: m.Name, endpoint: ep, status: st})
	}
	return out, nil
}

// leaderLast orders members so that the raft leader comes last.
func leaderLast(ms []member) {
	slices.SortStableFunc(ms, func(a, b member) int {
		switch {
		case a.leads() == b.leads():
			return 0
		case a.leads():
			return 1
		default:
			return -1
		}
	})
}

// fragmented says whether m's file is large enough against its live data
// to be worth a defragmentation.
func (s *etcdSpace) fragmented(m member) bool {
	size, inUse := m.status.DbSize, m.status.DbSizeInUse
	return size-inUse >= s.DefragMinBytes && float64(size) >= s.DefragRatio*float64(inUse)
}

// defragDuty defragments, one at a time and the raft leader last, the
// members whose file is much larger than their live data, while every
// member is healthy (answers, knows a leader, raises no alarm: a NOSPACE
// cluster is the alarm duty's).
func (s *etcdSpace) defragDuty(ctx context.Context, f Fence) error {
	s.defragging.Lock()
	defer s.defragging.Unlock()
	ms, err := s.healthyMembers(ctx)
	if err != nil {
		return err
	}
	var todo []uint64
	for _, m := range ms {
		if s.fragmented(m) {
			todo = append(todo, m.id)
		}
	}
	return s.defragInTurn(ctx, f, ms, todo, s.fragmented, s.healthyMembers, "fragmented")
}

// defragInTurn defragments the members of todo one by one, each while
// it is still worth it (want), a follower while there is one and the
// raft leader last. ms is the members as just read; before each
// defragmentation but the first they are read again with read (the
// previous one may have cost an election, so who comes last changes, or
// a member may have gone), and an error from read stops the turn.
func (s *etcdSpace) defragInTurn(ctx context.Context, f Fence, ms []member, todo []uint64,
	want func(member) bool, read func(context.Context) ([]member, error), reason string) error {
	var err error
	for len(todo) > 0 {
		if ms == nil {
			if ms, err = read(ctx); err != nil {
				return fmt.Errorf("stopped defragmenting: %w", err)
			}
		}
		next, ok := nextToDefrag(ms, todo, want)
		if !ok {
			return nil // the rest were removed or defragmented meanwhile
		}
		todo = slices.DeleteFunc(todo, func(id uint64) bool { return id == next.id })
		ms = nil
		if err := s.defragment(ctx, f, next, reason); err != nil {
			return err
		}
	}
	return nil
}

// nextToDefrag picks among ms the next member of todo still worth a
// defragmentation (want): a follower while there is one, the raft leader
// last.
func nextToDefrag(ms []member, todo []uint64, want func(member) bool) (member, bool) {
	ms = slices.Clone(ms)
	leaderLast(ms)
	for _, m := range ms {
		if slices.Contains(todo, m.id) && want(m) {
			return m, true
		}
	}
	return member{}, false
}

// healthyMembers is members, failing also when one reports an error
// (an alarm).
func (s *etcdSpace) healthyMembers(ctx context.Context) ([]member, error) {
	ms, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if len(m.status.Errors) > 0 {
			return nil, fmt.Errorf("etcd member %s reports %s", m.name, strings.Join(m.status.Errors, "; "))
		}
	}
	return ms, nil
}

// defragment defragments one member, the fence checked first, and logs
// and counts it.
func (s *etcdSpace) defragment(ctx context.Context, f Fence, m member, reason string) error {
	if _, err := f.Holds(ctx, s.Client); err != nil {
		return err
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, defragTimeout)
	_, err := s.Maintenance.Defragment(dctx, m.endpoint)
	cancel()
	took := time.Since(start)
	if err != nil {
		s.Metrics.EtcdDefrag(metrics.DefragError, 0)
		return fmt.Errorf("defragment etcd member %s (%s): %w", m.name, m.endpoint, err)
	}
	after := int64(-1)
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	if st, err := s.Maintenance.Status(sctx, m.endpoint); err == nil {
		after = st.DbSize
	}
	cancel()
	s.Metrics.EtcdDefrag(metrics.DefragOK, max(m.status.DbSize-after, 0))
	s.Log.Info("etcd member defragmented", "member", m.name, "endpoint", m.endpoint, "reason", reason,
		"raft_leader", m.leads(), "db_size_before", m.status.DbSize, "db_size_in_use", m.status.DbSizeInUse,
		"db_size_after", after, "duration", took)
	return nil
}

// alarmDuty lists etcd's alarms, exports them, and recovers from NOSPACE.
func (s *etcdSpace) alarmDuty(ctx context.Context, f Fence) error {
	resp, err := s.Maintenance.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("list etcd alarms: %w", err)
	}
	alarms := resp.Alarms
	s.Metrics.EtcdAlarms(alarmTypes(alarms))
	var nospace []*pb.AlarmMember
	for _, a := range alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			nospace = append(nospace, a)
		} else {
			s.Log.Error("etcd raised an alarm Berth does not handle", "alarm", a.Alarm.String(), "member_id", fmt.Sprintf("%x", a.MemberID))
		}
	}
	if len(nospace) == 0 {
		return nil
	}
	return s.recoverNoSpace(ctx, f, nospace)
}

// recoverNoSpace compacts to the current revision, defragments every
// member (the raft leader last), and disarms the alarms, unless the live
// data alone still fills a member's quota: then disarming would only let
// the next write raise it again, and the operator must raise the quota.
func (s *etcdSpace) recoverNoSpace(ctx context.Context, f Fence, alarms []*pb.AlarmMember) error {
	s.defragging.Lock()
	defer s.defragging.Unlock()
	s.Log.Error("etcd is out of space (NOSPACE alarm): every write is refused; compacting, defragmenting and disarming",
		"members_alarmed", len(alarms))
	rev, err := f.Holds(ctx, s.Client)
	if err != nil {
		return err
	}
	if _, err := s.Client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compact to revision %d: %w", rev, err)
	}
	ms, err := s.members(ctx)
	if err != nil {
		return fmt.Errorf("cannot recover from NOSPACE yet: %w", err)
	}
	var all []uint64
	for _, m := range ms {
		all = append(all, m.id)
	}
	if err := s.defragInTurn(ctx, f, ms, all, func(member) bool { return true }, s.members, "NOSPACE"); err != nil {
		return fmt.Errorf("cannot recover from NOSPACE yet: %w", err)
	}
	// The sizes after: a member whose live data fills its quota keeps its
	// alarm.
	after, err := s.members(ctx)
	if err != nil {
		return fmt.Errorf("cannot recover from NOSPACE yet: %w", err)
	}
	for _, m := range after {
		if q := m.status.DbSizeQuota; q > 0 && m.status.DbSize >= q {
			s.Log.Error("etcd is still out of space after compaction and defragmentation: raise quota-backend-bytes",
				"member", m.name, "db_size", m.status.DbSize, "db_size_in_use", m.status.DbSizeInUse, "quota_backend_bytes", q)
			return fmt.Errorf("etcd member %s: live data (%d bytes) fills its quota (%d bytes)", m.name, m.status.DbSizeInUse, q)
		}
	}
	for _, a := range alarms {
		if _, err := f.Holds(ctx, s.Client); err != nil {
			return err
		}
		if _, err := s.Maintenance.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			return fmt.Errorf("disarm NOSPACE of member %x: %w", a.MemberID, err)
		}
	}
	s.Metrics.EtcdNoSpaceRecovered()
	s.Metrics.EtcdAlarms(nil)
	s.Log.Warn("etcd NOSPACE alarm disarmed: writes are accepted again", "members_alarmed", len(alarms))
	return nil
}

// alarmTypes names the types among alarms, once each.
func alarmTypes(alarms []*pb.AlarmMember) []string {
	var out []string
	for _, a := range alarms {
		if t := a.Alarm.String(); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
