package servers

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Selection is what the cell conductors have left to retry a server's
// build on and what was tried (seed return-alternate-hosts): what /v1's
// selection show, `berth selection show` and the console's server page
// say, from one reader.
type Selection struct {
	Instance string
	// AttemptsMade is the instance's build count; it outlives the record.
	AttemptsMade int
	Status, Host string
	Cell         string
	MaxAttempts  int
	Attempts     []Attempt
	Alternates   []Alternate
	// Kept is false once the alternates record is gone: the instance went
	// ACTIVE (the record is deleted then) or was never scheduled. The
	// attempts are then the instance's failed ones, and the last of a
	// server not in ERROR is the build that worked (Built).
	Kept bool
}

// Attempt is one build try: Reason says why it failed; empty on a try
// still running or on the one that worked (Built).
type Attempt struct {
	Host   string
	Reason string
	At     time.Time
	Built  bool
}

// Alternate is one host left to retry on.
type Alternate struct {
	Host, Node, Cell string
}

// SelectionOf reads v's alternates: while its build is cast they ride
// in the cast (Build.Alternates), while a retry waits in the retry's copy
// of the cast, and an older Berth kept them in a key of their own (read
// first, as the cell conductor does). Found, they have the attempts and
// what is left; once gone the instance keeps its failed attempts.
// Attempts and Alternates are never nil.
func (s *Store) SelectionOf(ctx context.Context, v *Server) (Selection, error) {
	id := v.ID()
	out := Selection{Instance: id, Attempts: []Attempt{}, Alternates: []Alternate{}}
	in := v.Instance
	if in != nil {
		out.AttemptsMade, out.Status, out.Host, out.Cell = in.Attempts, in.Status, in.Host, in.Cell
	} else {
		out.Status = etcdschema.StatusBuild
	}
	alts, err := s.keptAlternates(ctx, id, in)
	if err != nil {
		return out, err
	}
	if alts != nil {
		out.Kept, out.MaxAttempts = true, alts.MaxAttempts
		for _, a := range alts.Attempts {
			out.Attempts = append(out.Attempts, Attempt{Host: a.Host, Reason: a.Reason, At: a.At})
		}
		for _, sel := range alts.Remaining {
			out.Alternates = append(out.Alternates, Alternate{Host: sel.ServiceHost, Node: sel.Nodename, Cell: sel.Cell})
		}
		return out, nil
	}
	if in != nil {
		for _, a := range in.FailedAttempts {
			out.Attempts = append(out.Attempts, Attempt{Host: a.Host, Reason: a.Reason, At: a.At})
		}
		if in.Host != "" && in.Status != etcdschema.StatusError && len(out.Attempts) > 0 {
			out.Attempts = append(out.Attempts, Attempt{Host: in.Host, At: in.UpdatedAt, Built: true})
		}
	}
	return out, nil
}

// keptAlternates reads, in one round trip, the places a build's
// alternates are kept (see SelectionOf) and returns the first found; nil
// when none is (built, failed for good, or not yet scheduled).
func (s *Store) keptAlternates(ctx context.Context, id string, in *etcdschema.Instance) (*etcdschema.Alternates, error) {
	ops := []clientv3.Op{clientv3.OpGet(s.keys.Alternates(id))}
	var castKey, retryKey string
	if in != nil && in.Host != "" {
		castKey = s.keys.Build(in.Host, id)
		ops = append(ops, clientv3.OpGet(castKey))
	}
	if in != nil && in.Cell != "" {
		retryKey = s.keys.Retry(in.Cell, id)
		ops = append(ops, clientv3.OpGet(retryKey))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("read alternates of %s: %w", id, err)
	}
	for _, r := range resp.Responses {
		kvs := r.GetResponseRange().Kvs
		if len(kvs) != 1 {
			continue
		}
		key := string(kvs[0].Key)
		switch key {
		case castKey:
			var b etcdschema.Build
			if err := etcdschema.Decode(key, kvs[0].Value, &b); err != nil {
				return nil, err
			}
			if alts, ok, err := b.CarriedAlternates(key); err != nil || ok {
				return alts, err
			}
		case retryKey:
			var retry etcdschema.Retry
			if err := etcdschema.Decode(key, kvs[0].Value, &retry); err != nil {
				return nil, err
			}
			alts, ok, err := retry.Build.CarriedAlternates(key)
			if err != nil || !ok {
				return nil, err
			}
			// The failed attempt's reason, as the cell conductor will
			// record it when it takes the retry.
			if n := len(alts.Attempts); n > 0 && alts.Attempts[n-1].Host == retry.FailedHost && alts.Attempts[n-1].Reason == "" {
				alts.Attempts[n-1].Reason = retry.Reason
			}
			return alts, nil
		default:
			var alts etcdschema.Alternates
			if err := etcdschema.Decode(key, kvs[0].Value, &alts); err != nil {
				return nil, err
			}
			return &alts, nil
		}
	}
	return nil, nil
}
