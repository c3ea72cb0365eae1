package bench

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtally"
)

// The recorder reading the member in the tool's process (ReadMember).
//
// Watching the whole prefix, the member delivered every write of the run
// to the recorder (14.2 events a server at 10,000 hosts): its notify and
// send work, and the recorder's own, for events most of which only
// counted a key kind. Now the stages are timed from watches of only the
// prefixes that mark them, each filtered to the event type it needs
// (about 5 events a server; 7 while the casts had a watch of /hosts/ of
// their own, which delivered every host's instance, capacity and sync
// writes too: a cast is now told by its instance record, castRecord),
// and the write table is read from the
// member's history once the phase is over: the same changes in the same
// revisions, counted outside the measured phase's CPU. The figures mean
// what they meant:
//   - each stage is still the arrival of the event that marks it, on one
//     stream (one watch before, several on one stream now:
//     embedetcd.Server.WatchClient). The member may deliver one watch's
//     events after a later revision of another's (a watch that fell behind
//     and caught up), so an event's time is the first arrival of its
//     revision or a later one (arrivalLocked): the stages stay in the
//     order etcd made them, as the one watch delivered them;
//   - the write table counts every put and delete under the prefix, and
//     the distinct revisions that made them, in the phase's revisions
//     (the header revision when it started, and when it ended: the range
//     the revisions per server figure has always been taken over).

// recorderRole is the recorder's role label (withFleet), what the tally
// counts its stream under.
const recorderRole = "bench recorder"

// timedWatches are the watches that time a server's stages (applyLocked
// reads nothing else), each with the one event type it uses.
func (r *Recorder) timedWatches(fromRev int64) []*pb.WatchCreateRequest {
	k := r.keys
	puts := []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}
	deletes := []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	watch := func(prefix string, filters []pb.WatchCreateRequest_FilterType) *pb.WatchCreateRequest {
		return &pb.WatchCreateRequest{Key: []byte(prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(prefix)),
			StartRevision: fromRev, Filters: filters}
	}
	return []*pb.WatchCreateRequest{
		watch(k.BuildRequests(), puts),      // queue's start
		watch(k.BuildRequestLeases(), puts), // queue's end, schedule's start
		watch(k.Consumers(), puts),          // the claim
		watch(k.CellsPrefix(), puts),        // casts (castRecord), ACTIVE, ERROR, cell0; followed servers
		watch(k.InstanceMappings(), deletes),
	}
}

// runTimed follows the timed watches on one stream of the member's from
// fromRev until ctx ends. A watch the member cancels (compacted, or
// refused) ends the run with an error, as the single watch's did.
func (r *Recorder) runTimed(ctx context.Context, fromRev int64) error {
	fail := func(err error) error {
		r.mu.Lock()
		r.activeErr = err
		r.mu.Unlock()
		return err
	}
	stream, err := r.member.WatchClient().Watch(ctx)
	if err != nil {
		return fail(fmt.Errorf("recorder: watch stream: %w", err))
	}
	for _, req := range r.timedWatches(fromRev) {
		if r.tally != nil {
			r.tally.Add(recorderRole, etcdtally.WatchOpen, 1)
		}
		if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
			return fail(fmt.Errorf("recorder: watch %s: %w", req.Key, err))
		}
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fail(fmt.Errorf("recorder: watch stream: %w", err))
		}
		if r.tally != nil && !resp.Created {
			r.tally.Add(recorderRole, etcdtally.WatchResp, 1)
			r.tally.Add(recorderRole, etcdtally.WatchEvents, int64(len(resp.Events)))
		}
		if resp.Canceled || resp.CompactRevision != 0 {
			return fail(fmt.Errorf("recorder: watch %d cancelled (compacted at %d): %s", resp.WatchId, resp.CompactRevision, resp.CancelReason))
		}
		if len(resp.Events) == 0 {
			continue
		}
		now := time.Now()
		r.mu.Lock()
		for _, ev := range resp.Events {
			r.applyLocked(now, (*clientv3.Event)(ev))
		}
		r.mu.Unlock()
	}
}

// writesFromHistory counts the changes under the prefix in the revisions
// (from, to] from the member's history.
func (r *Recorder) writesFromHistory(from, to int64) (Writes, error) {
	w := Writes{Puts: map[string]int64{}, Deletes: map[string]int64{}}
	kinds := newKeyKinds(r.pfx.all) // its own: the watch names under mu
	var last int64
	err := r.member.History(r.pfx.all, from, to, func(c embedetcd.Change) {
		if c.Revision != last {
			w.Revisions++
			last = c.Revision
		}
		if c.Deleted {
			w.Deletes[kinds.of(c.Key)]++
		} else {
			w.Puts[kinds.of(c.Key)]++
		}
	})
	if err != nil {
		return Writes{}, fmt.Errorf("recorder: the phase's writes: %w", err)
	}
	return w, nil
}
