package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The host's instance sync (seed isolate-scheduler-db), with the flavors
// issue 17 adds. The agent's periodic HostSync lists the host's instances;
// a scheduler whose cache differs re-reads the host. The seed compares
// uuids only and names the case it cannot catch: a resize whose instance
// info update was lost leaves the right uuid with the wrong flavor. The
// sync now pairs each uuid with its instance record's flavor id, so that
// difference is caught too, and the re-read takes the flavor of the
// instance record (the truth, as Nova's re-read takes the instance table)
// where the host's instance info still says another.

// syncedFlavors are the flavor ids a HostSync gave its instances: the
// sync's own uuid and flavor id slices, paired by index (their strings
// are those of the instances and names the host manager holds), a ""
// flavor id unknown; empty for an older agent's uuid-only list or ids
// that do not pair (etcdschema.HostSync.Flavors's rule). A host keeps
// its last sync's only while a re-read may read them (applySyncLocked):
// as a map by uuid they were 64 MB of the heap at a cold start of 100,000
// hosts of ten instances (a ten-entry map is about 640 bytes), the two
// slices 320 bytes a host, 32 MB when every host kept them.
type syncedFlavors struct {
	uuids, ids []string
}

// syncedFlavorsOf is what hs says of its instances' flavors.
func syncedFlavorsOf(hs *etcdschema.HostSync) syncedFlavors {
	if len(hs.FlavorIDs) == 0 || len(hs.FlavorIDs) != len(hs.UUIDs) {
		return syncedFlavors{}
	}
	return syncedFlavors{uuids: hs.UUIDs, ids: hs.FlavorIDs}
}

// clone is sf with arrays of its own.
func (sf syncedFlavors) clone() syncedFlavors {
	return syncedFlavors{uuids: slices.Clone(sf.uuids), ids: slices.Clone(sf.ids)}
}

// each calls fn with every synced instance whose flavor id is known.
func (sf syncedFlavors) each(fn func(uuid, flavorID string)) {
	for i, u := range sf.uuids {
		if sf.ids[i] != "" {
			fn(u, sf.ids[i])
		}
	}
}

// syncDiffers says how a host's sync (uuids, and the flavors it knows,
// empty for an older agent's uuid-only list) differs from the cached
// instances: "" when it does not.
func syncDiffers(uuids []string, flavors syncedFlavors, cached map[string]*etcdschema.InstanceInfo) string {
	if len(uuids) != len(cached) {
		return "instances"
	}
	for _, u := range uuids {
		if _, ok := cached[u]; !ok {
			return "instances"
		}
	}
	diff := ""
	flavors.each(func(u, f string) {
		if info, ok := cached[u]; ok && f != info.FlavorID {
			diff = "flavor"
		}
	})
	return diff
}

// correctFlavors replaces, in next (a host's instance info as just
// re-read), each instance whose flavor is not the one the host's last
// sync reported with what its instance record in cell says, when that
// record places it on host. The records are read 64 a transaction, only
// for the instances that differ.
func (hm *HostManager) correctFlavors(ctx context.Context, host, cell string, synced syncedFlavors, next map[string]*etcdschema.InstanceInfo) error {
	var differ []string
	synced.each(func(u, f string) {
		if info, ok := next[u]; ok && info.FlavorID != f && !slices.Contains(differ, u) {
			differ = append(differ, u)
		}
	})
	if len(differ) == 0 || cell == "" {
		return nil
	}
	for start := 0; start < len(differ); start += 64 {
		var ops []clientv3.Op
		for _, u := range differ[start:min(start+64, len(differ))] {
			ops = append(ops, clientv3.OpGet(hm.keys.CellInstance(cell, u)))
		}
		resp, err := hm.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("re-read instance records of %s: %w", host, err)
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				var inst etcdschema.Instance
				if err := etcdschema.Decode(string(kv.Key), kv.Value, &inst); err != nil {
					hm.log.Warn("ignoring unreadable instance", "host", host, "key", string(kv.Key), "error", err)
					continue
				}
				was, ok := next[inst.UUID]
				if !ok || inst.Host != host || inst.Flavor.ID == was.FlavorID {
					continue
				}
				hm.log.Info("instance info's flavor differs from the instance record; using the record's",
					"host", host, "instance", inst.UUID, "info_flavor_id", was.FlavorID, "flavor_id", inst.Flavor.ID)
				next[inst.UUID] = infoOf(&inst)
			}
		}
	}
	return nil
}

// infoOf is the instance info an instance record stands for.
func infoOf(inst *etcdschema.Instance) *etcdschema.InstanceInfo {
	return &etcdschema.InstanceInfo{UUID: inst.UUID, Host: inst.Host, FlavorID: inst.Flavor.ID,
		Flavor: inst.Flavor.Name, State: strings.ToLower(inst.Status), UpdatedAt: inst.UpdatedAt}
}
