package servers

import (
	"context"
	"fmt"
	"time"

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

// SelectionOf reads v's alternates record: while it is kept it has the
// attempts and what is left; once gone the instance keeps its failed
// attempts. Attempts and Alternates are never nil.
func (s *Store) SelectionOf(ctx context.Context, v *Server) (Selection, error) {
	id := v.ID()
	out := Selection{Instance: id, Attempts: []Attempt{}, Alternates: []Alternate{}}
	in := v.Instance
	if in != nil {
		out.AttemptsMade, out.Status, out.Host, out.Cell = in.Attempts, in.Status, in.Host, in.Cell
	} else {
		out.Status = etcdschema.StatusBuild
	}
	key := s.keys.Alternates(id)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return out, fmt.Errorf("read alternates of %s: %w", id, err)
	}
	if len(resp.Kvs) == 1 {
		var alts etcdschema.Alternates
		if err := etcdschema.Decode(key, resp.Kvs[0].Value, &alts); err != nil {
			return out, err
		}
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
