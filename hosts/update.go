package hosts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// ErrNotFound is a host with no service record.
var ErrNotFound = errors.New("compute host not found")

// ErrKeptChanging is a service record that changed under every attempt
// to update it.
var ErrKeptChanging = errors.New("the service record kept changing")

// Change is an operator's change to a host's service; nil fields are left
// as they are.
type Change struct {
	// Disabled sets the status; it also clears the disabled reason, or
	// sets it to DisabledReason when disabling.
	Disabled       *bool
	DisabledReason *string
	ForcedDown     *bool
}

// Updated is a host after a Change.
type Updated struct {
	Host *Host
	// Unconfirmed is set when the status is recorded but the up agent did
	// not confirm COMPUTE_STATUS_DISABLED within the wait.
	Unconfirmed error
}

// Update records ch on host's service. When ch sets the status and the
// host is up, it waits (bounded by wait) for the agent, which watches its
// service record, to set or clear COMPUTE_STATUS_DISABLED on its
// provider, as Nova's API calls set_host_enabled. A down host is only
// marked; its agent's provider sync sets the trait when it comes back.
// ComputeFilter sees the record at once either way, so the next
// scheduling request no longer picks the host.
func (s *Store) Update(ctx context.Context, host string, ch Change, wait time.Duration) (*Updated, error) {
	if host == "" || strings.Contains(host, "/") {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, host)
	}
	h := &Host{}
	key := s.keys.Service(host)
	var notFound, conflict bool
	// Read, change, write if unchanged; again while the record changes
	// under it (10 times at most) or etcd cannot commit (storePatience). A
	// write whose answer etcd lost is harmless to repeat: the next read
	// finds the change made and writes nothing.
	err := s.retry(ctx, "update service", func(ctx context.Context) error {
		for attempts := 0; attempts < 10; attempts++ {
			resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(s.keys.Alive(host))).Commit()
			if err != nil {
				return err
			}
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				notFound = true
				return nil
			}
			h.Alive = len(resp.Responses[1].GetResponseRange().Kvs) > 0
			h.CreateRev = kvs[0].CreateRevision
			var svc etcdschema.Service
			if err := etcdschema.Decode(key, kvs[0].Value, &svc); err != nil {
				return err
			}
			next := apply(svc, ch)
			if next == svc {
				h.Service, h.ModRev = svc, kvs[0].ModRevision
				return nil
			}
			next.UpdatedAt = time.Now().UTC()
			t, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
				Then(clientv3.OpPut(key, etcdschema.MustEncode(&next))).Commit()
			if err != nil {
				return err
			}
			if t.Succeeded {
				h.Service, h.ModRev = next, t.Header.Revision
				return nil
			}
		}
		conflict = true
		return nil
	}, "host", host)
	switch {
	case err != nil:
		return nil, err
	case notFound:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, host)
	case conflict:
		return nil, fmt.Errorf("%w: %s", ErrKeptChanging, host)
	}
	out := &Updated{Host: h}
	s.log.Info("service updated", "host", host, "disabled", h.Service.Disabled, "reason", h.Service.DisabledReason,
		"forced_down", h.Service.ForcedDown, "up", h.Up())
	// Waited for on every status change to an up host, not only when the
	// flag flipped: repeating a disable whose wait timed out waits again
	// (one read when the trait is already right).
	if ch.Disabled != nil && h.Up() {
		if err := s.WaitTrait(ctx, h.Service.ProviderUUID, h.Service.Disabled, wait); err != nil {
			out.Unconfirmed = err
			s.log.Warn("agent did not confirm the disabled trait", "host", host, "error", err)
		}
	}
	return out, nil
}

func apply(svc etcdschema.Service, ch Change) etcdschema.Service {
	next := svc
	if ch.Disabled != nil {
		next.Disabled = *ch.Disabled
		next.DisabledReason = ""
		if next.Disabled && ch.DisabledReason != nil {
			next.DisabledReason = *ch.DisabledReason
		}
	}
	if ch.ForcedDown != nil {
		next.ForcedDown = *ch.ForcedDown
	}
	return next
}

// WaitTrait watches the provider record until COMPUTE_STATUS_DISABLED is
// present (want) or absent (!want), or timeout passes.
func (s *Store) WaitTrait(ctx context.Context, provider string, want bool, timeout time.Duration) error {
	if provider == "" {
		return errors.New("the service record names no provider")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := s.keys.Provider(provider)
	has := func(v []byte) (bool, error) {
		var p etcdschema.Provider
		if err := etcdschema.Decode(key, v, &p); err != nil {
			return false, err
		}
		return slices.Contains(p.Traits, placement.TraitComputeStatusDisabled), nil
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no confirmation within %s", timeout)
		}
		return fmt.Errorf("read provider %s: %w", provider, err)
	}
	if len(resp.Kvs) == 1 {
		if got, err := has(resp.Kvs[0].Value); err != nil || got == want {
			return err
		}
	}
	// One key, for at most the confirm timeout, from the revision just
	// read: a bounded wait, not a prefix followed for the process's life,
	// so not a job for internal/informer.
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(resp.Header.Revision+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watch provider %s: %w", provider, err)
		}
		for _, ev := range wr.Events {
			if ev.Kv == nil || len(ev.Kv.Value) == 0 {
				continue
			}
			if got, err := has(ev.Kv.Value); err != nil || got == want {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no confirmation within %s", timeout)
	}
	return errors.New("watch ended")
}
