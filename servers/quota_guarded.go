package servers

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/quotas"
)

// commitHeld commits ops under cmps together with the quota Guard of a
// move that holds held beside what its server held (an evacuation's or
// a live migration's destination claim, which a quota count adds): the
// project's usage record must cover it (package quotas, record.go). The
// guard sits in a nested transaction so that its failure (another create
// or move in the project went first) is told apart from cmps': the
// first reserves again, the second is the caller's (stored false).
func (s *Store) commitHeld(ctx context.Context, held quotas.MoveRequest, cmps []clientv3.Cmp, ops []clientv3.Op) (stored bool, err error) {
	for try := 0; ; try++ {
		var guard quotas.Guard
		if s.quotas != nil {
			if guard, err = s.quotas.ReserveMove(ctx, held); err != nil {
				return false, err
			}
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).
			Then(clientv3.OpTxn(guard.Cmps, append(ops[:len(ops):len(ops)], guard.Ops...), nil)).Commit()
		if err != nil {
			return false, err
		}
		if !resp.Succeeded {
			return false, nil
		}
		if resp.Responses[0].GetResponseTxn().Succeeded {
			return true, nil
		}
		if try >= maxQuotaTries {
			return false, fmt.Errorf("the project's usage %w", ErrKeptChanging)
		}
	}
}
