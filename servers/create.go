package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/quotas"
)

// MaxCount is the most servers one request may ask for.
const MaxCount = 1000

// CreateRequest is one request for Count servers, checked by its API:
// the flavor resolved, the zone, group and host checked (CheckPlacement,
// CheckRequestedHost).
type CreateRequest struct {
	Name   string
	Flavor etcdschema.Flavor
	// Count servers are created, or fewer down to MinCount (0: Count)
	// when the project's quotas leave room for fewer (SetQuotas).
	Count, MinCount   int
	ProjectID, UserID string
	AvailabilityZone  string
	Hints             etcdschema.SchedulerHints
	Host, Node        string // the requested destination, if any
	RequestID         string
	Image             *etcdschema.BootImage // nil: none
	Metadata          map[string]string
	Description       *string
	// Forced says Host/Node were forced (availability_zone
	// "zone:host[:node]"): the scheduler skips its filters for them.
	Forced bool
	// Checked are the records the API checked the request against (its
	// flavor, its image) at the revisions it read them: the servers are
	// stored only while each is unchanged, or not at all
	// (ErrCheckedRecordChanged). The API may then answer from records it
	// remembers instead of reading them for every create, and still be
	// exact: a flavor or image changed or deleted meanwhile fails the
	// store, and the API checks again over fresh reads.
	Checked []CheckedRecord
}

// CheckedRecord is a record a create was checked against, with the mod
// revision it was read at.
type CheckedRecord struct {
	Key         string
	ModRevision int64
}

// ErrCheckedRecordChanged is a create none of whose servers were stored
// because a record of its CreateRequest.Checked changed or went since it
// was read: check the request again against fresh reads.
var ErrCheckedRecordChanged = errors.New("a record the create was checked against changed")

// Reservation is what a create stored: one BuildRequest a server, in
// launch order, under one reservation id.
type Reservation struct {
	ID            string
	BuildRequests []*etcdschema.BuildRequest
}

// ErrGroupDeleted is a create whose server group went while its build
// requests were being stored.
var ErrGroupDeleted = errors.New("server group deleted during the create")

// newReservationID is Nova's reservation id: "r-" and eight characters.
func newReservationID() string { return "r-" + uuid.NewString()[:8] }

// Create stores the BuildRequests and InstanceMappings of req (and the
// group memberships of a group hint) for the superconductors to pick up.
// A reservation goes in as few transactions as etcd allows, so the
// superconductor sees whole multi-instance requests. A create that fits
// one transaction and its project's usage record is stored together with
// the other creates ready at the same moment (create_batch.go); the rest
// count and go alone.
func (s *Store) Create(ctx context.Context, req CreateRequest) (*Reservation, error) {
	if req.Count < 1 || req.Count > MaxCount {
		return nil, fmt.Errorf("count %d outside 1..%d", req.Count, MaxCount)
	}
	if err := ValidateHints(req.Hints); err != nil {
		return nil, err
	}
	if s.quotas != nil && req.Count <= perTxnOf(req.Hints.Group) {
		res, done, lost, err := s.createBatched(ctx, req)
		if done {
			return res, err
		}
		if lost {
			// The batch's answer was lost: store these very servers, or
			// find them stored, as StoreOnce does after a lost answer.
			return s.createAlone(ctx, req, res)
		}
	}
	return s.createAlone(ctx, req, nil)
}

// perTxnOf and perSubOf size a create's transactions: a transaction per
// 62 servers (41 in a group), as before the quota index: three keys a
// server (four in a group) in sub-transactions of at most 40 servers
// (30), each within etcd's 128 operations a transaction level beside the
// few of the level above (the sub-transactions and the quota guard). A
// multi-create the superconductor schedules as one is then as large as
// it was.
func perTxnOf(group string) int {
	if group != "" {
		return 41
	}
	return 62
}

func perSubOf(group string) int {
	if group != "" {
		return 30
	}
	return 40
}

// newReservation is req's count BuildRequests under a new reservation id.
func newReservation(req CreateRequest, count int) *Reservation {
	now := time.Now().UTC()
	res := &Reservation{ID: newReservationID(), BuildRequests: make([]*etcdschema.BuildRequest, count)}
	for i := range res.BuildRequests {
		name := req.Name
		if count > 1 {
			name = fmt.Sprintf("%s-%d", req.Name, i+1) // Nova's multi-create naming
		}
		res.BuildRequests[i] = &etcdschema.BuildRequest{InstanceUUID: uuid.NewString(), Name: name,
			ReservationID: res.ID, Index: i, Count: count, Flavor: req.Flavor.Embedded(),
			ProjectID: req.ProjectID, UserID: req.UserID, AvailabilityZone: req.AvailabilityZone,
			Hints: req.Hints, RequestID: req.RequestID, CreatedAt: now, Host: req.Host, Node: req.Node, Forced: req.Forced,
			Image: req.Image, Metadata: req.Metadata, Description: req.Description}
	}
	return res
}

// partTxn is the comparisons and operations that store build requests
// brs of req (without the quota guard): a sub-transaction per perSub
// servers, the group's existence compared, and for the first part (first)
// the records req was checked against.
func (s *Store) partTxn(req CreateRequest, brs []*etcdschema.BuildRequest, first bool) ([]clientv3.Cmp, []clientv3.Op) {
	var sub []clientv3.Op
	for _, writes := range s.partWrites(req, brs) {
		ops := make([]clientv3.Op, len(writes))
		for i, w := range writes {
			ops[i] = clientv3.OpPut(w.key, string(w.value))
		}
		sub = append(sub, clientv3.OpTxn(nil, ops, nil))
	}
	var cmps []clientv3.Cmp
	for _, c := range s.partCompares(req, first) {
		cmps = append(cmps, clientv3.FromCompare(c))
	}
	return cmps, sub
}

// partCompares are the comparisons of a part storing req's build
// requests: the group's existence, and for the first part (first) the
// records req was checked against. The first part commits the request:
// its checks hold then; later parts continue what was accepted, as
// quotas do. partTxn and partRequests both compare these.
func (s *Store) partCompares(req CreateRequest, first bool) []*pb.Compare {
	cmps := make([]*pb.Compare, 0, 1+len(req.Checked))
	if group := req.Hints.Group; group != "" {
		cmps = append(cmps, rawtxn.Present(s.keys.ServerGroup(group)))
	}
	if first {
		for _, rec := range req.Checked {
			cmps = append(cmps, rawtxn.ModRevisionIs(rec.Key, rec.ModRevision))
		}
	}
	return cmps
}

// partRequests is partTxn as etcd's messages (package rawtxn), for the
// batched create (W1 in docs/flows.md), which every create of a busy API
// takes: clientv3's builders clone each comparison by reflection at
// Compare, If and OpTxn and again when a nested Op becomes a request.
// It always stores the first part.
func (s *Store) partRequests(req CreateRequest, brs []*etcdschema.BuildRequest) ([]*pb.Compare, []*pb.RequestOp) {
	var sub []*pb.RequestOp
	for _, writes := range s.partWrites(req, brs) {
		ops := make([]*pb.RequestOp, len(writes))
		for i, w := range writes {
			ops[i] = rawtxn.PutBytes(w.key, w.value)
		}
		sub = append(sub, rawtxn.Nested(&pb.TxnRequest{Success: ops}))
	}
	return s.partCompares(req, true), sub
}

// write is one key a create puts. Its value is bytes, which the batched
// create's messages take as they are (rawtxn.PutBytes): a string was
// copied again into every put.
type write struct {
	key   string
	value []byte
}

// partWrites are the keys that store build requests brs of req, a
// sub-transaction's worth (perSub servers) each.
func (s *Store) partWrites(req CreateRequest, brs []*etcdschema.BuildRequest) [][]write {
	group, perSub := req.Hints.Group, perSubOf(req.Hints.Group)
	var subs [][]write
	var writes []write
	for i, br := range brs {
		m := &etcdschema.InstanceMapping{InstanceUUID: br.InstanceUUID, ProjectID: req.ProjectID, CreatedAt: br.CreatedAt}
		writes = append(writes,
			write{s.keys.InstanceMapping(br.InstanceUUID), etcdschema.MustEncodeBytes(m)},
			// The project's quota index, with the mapping (quotas).
			write{s.keys.QuotaInstance(req.ProjectID, br.InstanceUUID),
				etcdschema.MustEncodeBytes(&etcdschema.QuotaInstance{CreatedAt: br.CreatedAt})},
			write{s.keys.BuildRequest(br.InstanceUUID), etcdschema.MustEncodeBytes(br)})
		if group != "" {
			// Nova adds the instance to its group at create; the
			// scheduler later records its host on the same key.
			writes = append(writes, write{s.keys.ServerGroupMember(group, br.InstanceUUID),
				etcdschema.MustEncodeBytes(&etcdschema.ServerGroupMember{InstanceUUID: br.InstanceUUID, CreatedAt: br.CreatedAt})})
		}
		if (i+1)%perSub == 0 || i+1 == len(brs) {
			subs = append(subs, writes)
			writes = nil
		}
	}
	return subs
}

// createAlone stores req in transactions of its own, each after its own
// quota check. lost, when not nil, is a reservation whose batch's answer
// etcd lost: it is stored whole (its count checked again) or found
// stored, never stored twice nor replaced by other servers.
func (s *Store) createAlone(ctx context.Context, req CreateRequest, lost *Reservation) (*Reservation, error) {
	count := req.Count
	var guard quotas.Guard
	if s.quotas != nil {
		least := max(req.MinCount, 1)
		if lost != nil {
			least = count
		}
		var err error
		if count, guard, err = s.reserve(ctx, req, least, req.Count); err != nil {
			if lost != nil {
				if landed, lerr := s.landed(ctx, lost); lerr != nil || landed {
					return lost, lerr
				}
			}
			return nil, err
		}
	}
	res, retry := lost, lost != nil
	if res == nil {
		res = newReservation(req, count)
	}
	perTxn := perTxnOf(req.Hints.Group)
	for start := 0; start < count; start += perTxn {
		end := min(start+perTxn, count)
		if s.quotas != nil && start > 0 {
			// The guard counted before the previous part landed: count
			// again, with it.
			var err error
			if _, guard, err = s.reserve(ctx, req, end-start, end-start); err != nil {
				return nil, fmt.Errorf("servers %d-%d of %d: %w", start+1, count, count, err)
			}
		}
		cmps, ops := s.partTxn(req, res.BuildRequests[start:end], start == 0)
		guardKey := s.keys.InstanceMapping(res.BuildRequests[start].InstanceUUID)
		for try := 0; ; try++ {
			stored, err := s.storeOnce(ctx, req.RequestID, guardKey, append(slices.Clip(cmps), guard.Cmps...),
				append(slices.Clip(ops), guard.Ops...), retry)
			if err != nil {
				return nil, fmt.Errorf("store build requests: %w", err)
			}
			if stored {
				break
			}
			if start == 0 {
				changed, err := s.checkedChanged(ctx, req.Checked)
				if err != nil {
					return nil, fmt.Errorf("store build requests: %w", err)
				}
				if changed {
					return nil, ErrCheckedRecordChanged
				}
			}
			if s.quotas == nil || s.groupGone(ctx, req.Hints.Group) {
				return nil, ErrGroupDeleted
			}
			if try >= maxQuotaTries {
				return nil, fmt.Errorf("store build requests: the project's usage %w", ErrKeptChanging)
			}
			// Another create moved the project's usage since the count:
			// check this part again against the new count.
			if _, guard, err = s.reserve(ctx, req, end-start, end-start); err != nil {
				if start > 0 {
					return nil, fmt.Errorf("servers %d-%d of %d: %w", start+1, count, count, err)
				}
				return nil, err
			}
		}
		retry = false
	}
	s.logCreated(req, res)
	return res, nil
}

// logCreated logs a stored create.
func (s *Store) logCreated(req CreateRequest, res *Reservation) {
	s.log.Info("servers requested", "request_id", req.RequestID, "count", req.Count, "flavor", req.Flavor.Name,
		"reservation", res.ID)
}

// landed reports whether res's first mapping exists (read until etcd
// answers, for StorePatience).
func (s *Store) landed(ctx context.Context, res *Reservation) (bool, error) {
	var n int64
	err := s.RetryStore(ctx, "read a create whose answer was lost", func(ctx context.Context) error {
		resp, err := s.cli.Get(ctx, s.keys.InstanceMapping(res.BuildRequests[0].InstanceUUID), clientv3.WithCountOnly())
		if err == nil {
			n = resp.Count
		}
		return err
	}, "reservation", res.ID)
	return n > 0, err
}

// maxQuotaTries bounds how often one create counts again because other
// creates in its project kept committing first; each round one of them
// commits, so only a crowd larger than this runs out.
const maxQuotaTries = 1000

// reserve checks servers min..max of req against its project's quotas.
func (s *Store) reserve(ctx context.Context, req CreateRequest, min, max int) (int, quotas.Guard, error) {
	return s.quotas.ReserveServers(ctx, quotas.ServerRequest{Project: req.ProjectID, User: req.UserID, Group: req.Hints.Group,
		Min: min, Max: max, VCPUs: int64(req.Flavor.VCPUs), RAMMB: int64(req.Flavor.RAMMB), RequestID: req.RequestID})
}

// checkedChanged reports whether a record of checked is no longer at the
// revision it was checked at (read in one transaction).
func (s *Store) checkedChanged(ctx context.Context, checked []CheckedRecord) (bool, error) {
	if len(checked) == 0 {
		return false, nil
	}
	ops := make([]clientv3.Op, len(checked))
	for i, rec := range checked {
		ops[i] = clientv3.OpGet(rec.Key, clientv3.WithKeysOnly())
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("read the records the create was checked against: %w", err)
	}
	for i, rec := range checked {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].ModRevision != rec.ModRevision {
			return true, nil
		}
	}
	return false, nil
}

// groupGone reports whether group is named and no longer exists (an
// error reading it counts as existing: the caller tries again).
func (s *Store) groupGone(ctx context.Context, group string) bool {
	if group == "" {
		return false
	}
	resp, err := s.cli.Get(ctx, s.keys.ServerGroup(group), clientv3.WithCountOnly())
	return err == nil && resp.Count == 0
}

// StoreOnce commits ops if cmps hold, exactly once however often etcd's
// answer is lost (see StoreAttempt). Transient etcd errors are retried
// for StorePatience. stored is false only when cmps failed.
func (s *Store) StoreOnce(ctx context.Context, rid, guard string, cmps []clientv3.Cmp, ops []clientv3.Op) (stored bool, err error) {
	return s.storeOnce(ctx, rid, guard, cmps, ops, false)
}

// storeOnce is StoreOnce; retry says an earlier attempt's answer was
// already lost (its first attempt compares the guard too).
func (s *Store) storeOnce(ctx context.Context, rid, guard string, cmps []clientv3.Cmp, ops []clientv3.Op, retry bool) (stored bool, err error) {
	err = s.RetryStore(ctx, "store build requests", func(ctx context.Context) error {
		var err error
		stored, err = s.StoreAttempt(ctx, retry, guard, cmps, ops)
		retry = true
		return err
	}, "request_id", rid)
	return stored, err
}

// StoreAttempt is one transaction of StoreOnce. guard is a key among
// ops, of a fresh uuid: it cannot exist before the first attempt, which
// goes as it is. A retry also compares that guard does not exist yet, so
// an earlier attempt that landed (only its answer lost) makes it fail on
// the guard, which its Else read turns into "stored".
func (s *Store) StoreAttempt(ctx context.Context, retry bool, guard string, cmps []clientv3.Cmp, ops []clientv3.Op) (bool, error) {
	if !retry {
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	}
	guarded := append(slices.Clip(cmps), clientv3.Compare(clientv3.CreateRevision(guard), "=", 0))
	resp, err := s.cli.Txn(ctx).If(guarded...).Then(ops...).Else(clientv3.OpGet(guard, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded || resp.Responses[0].GetResponseRange().Count > 0, nil
}
