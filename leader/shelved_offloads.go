package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
)

// ShelvedOffloadDuty is Nova's _poll_shelved_instances: a server shelved
// with shelved_offload_time above 0 is offloaded once that time has
// passed. The agent that stopped it wrote its due date under
// Keys.ShelvedOffloads, so each run reads only the shelved servers; a due
// one still SHELVED with no task on the host that stopped it gets the
// shelveOffload action (a request id of its own, as Nova's periodic
// context has) and its host the offload cast, in one fenced transaction
// guarded by the instance's revision. An entry whose server was
// deleted, unshelved or offloaded meanwhile is dropped.
func ShelvedOffloadDuty(cli *clientv3.Client, keys etcdschema.Keys, interval time.Duration, log hclog.Logger,
	now func() time.Time) Duty {
	if now == nil {
		now = time.Now
	}
	return Duty{Name: "shelved_offloads", Interval: interval, Run: func(ctx context.Context, f Fence) error {
		resp, err := cli.Get(ctx, keys.ShelvedOffloads(), clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("read shelved offloads: %w", err)
		}
		at := now().UTC()
		for _, kv := range resp.Kvs {
			var so etcdschema.ShelvedOffload
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &so); err != nil {
				log.Warn("skipping unreadable shelved offload", "key", string(kv.Key), "error", err)
				continue
			}
			if at.Before(so.Due) {
				continue
			}
			if err := offloadShelved(ctx, cli, keys, f, &so, kv.ModRevision, at, log); err != nil {
				return err
			}
		}
		return nil
	}}
}

func offloadShelved(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, f Fence,
	so *etcdschema.ShelvedOffload, soRev int64, now time.Time, log hclog.Logger) error {
	ikey := keys.CellInstance(so.Cell, so.InstanceUUID)
	ir, err := cli.Get(ctx, ikey)
	if err != nil {
		return fmt.Errorf("read %s: %w", ikey, err)
	}
	entry := clientv3.Compare(clientv3.ModRevision(keys.ShelvedOffload(so.InstanceUUID)), "=", soRev)
	drop := clientv3.OpDelete(keys.ShelvedOffload(so.InstanceUUID))
	var in etcdschema.Instance
	if len(ir.Kvs) == 1 {
		if err := etcdschema.Decode(ikey, ir.Kvs[0].Value, &in); err != nil {
			return err
		}
	}
	if len(ir.Kvs) == 0 || in.Status != etcdschema.StatusShelved || in.TaskState != "" || in.Host != so.Host {
		if _, err := f.Txn(ctx, cli, []clientv3.Cmp{entry}, drop); err != nil {
			return fmt.Errorf("drop stale shelved offload of %s: %w", so.InstanceUUID, err)
		}
		return nil
	}
	requestID := "req-" + uuid.NewString()
	in.TaskState, in.UpdatedAt = etcdschema.TaskShelvingOffloading, now
	in.StartAction(etcdschema.ActionShelveOffload, requestID, now)
	cast := records.ShelveCast(&in, etcdschema.StepShelveOffload, requestID, now)
	ok, err := f.Txn(ctx, cli, []clientv3.Cmp{entry, clientv3.Compare(clientv3.ModRevision(ikey), "=", ir.Kvs[0].ModRevision)},
		clientv3.OpPut(ikey, etcdschema.MustEncode(&in)),
		clientv3.OpPut(keys.Build(in.Host, in.UUID), etcdschema.MustEncode(cast)), drop)
	if err != nil {
		return fmt.Errorf("cast the offload of %s: %w", in.UUID, err)
	}
	if ok {
		log.Info("shelved server due for offload; cast its offload", "instance", in.UUID, "host", in.Host,
			"due", so.Due, "request_id", requestID)
	}
	return nil
}
