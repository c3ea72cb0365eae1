package etcdschema

import (
	"encoding/json"
	"fmt"
)

// StringSharer returns a string equal to b, one it already holds where it
// can (a reader's table of the few flavor names a cloud has). It must be
// safe for concurrent use: lists decode on several goroutines.
type StringSharer interface {
	Share(b []byte) string
}

// DecodeInstanceInfoSharing is Decode for an InstanceInfo at key that
// gives the record host (when equal to its own host name; a reader passes
// the host its key names) and names' strings for its flavor name and id,
// instead of new copies: a scheduler keeps every instance's info (a
// million at 100,000 hosts) and these were three throwaway strings a
// record. The value is Decode's, field for field; names may be nil.
func DecodeInstanceInfoSharing(key string, data []byte, host string, names StringSharer) (*InstanceInfo, error) {
	v := &InstanceInfo{}
	if !v.decodeFastSharing(data, host, names) {
		*v = InstanceInfo{} // the fast path writes as it reads
		if err := json.Unmarshal(data, v); err != nil {
			return v, fmt.Errorf("decode %s: %w", key, err)
		}
		if v.Host == host {
			v.Host = host
		}
		if names != nil {
			v.Flavor, v.FlavorID = names.Share([]byte(v.Flavor)), names.Share([]byte(v.FlavorID))
		}
	}
	return v, checkVersion(key, v)
}

// DecodeHostSyncSharing is Decode for a HostSync at key whose uuids are
// uuid's strings for them and whose flavor ids are flavors' (either may
// be nil): a scheduler compares every host's sync with the instances it
// holds (100,000 syncs of ten uuids each at a cold start of 100,000
// hosts), so the uuids it holds already need no copy, and the flavors
// it keeps by uuid share the strings of those it holds. uuid must not
// keep its bytes. The value is Decode's, field for field.
func DecodeHostSyncSharing(key string, data []byte, uuid func(b []byte) string, flavors StringSharer) (*HostSync, error) {
	h := &HostSync{}
	if !h.decodeFastSharing(data, uuid, flavors) {
		*h = HostSync{}
		if err := json.Unmarshal(data, h); err != nil {
			return h, fmt.Errorf("decode %s: %w", key, err)
		}
		share := func(ss []string, str func(b []byte) string) {
			for i, s := range ss {
				ss[i] = str([]byte(s))
			}
		}
		if uuid != nil {
			share(h.UUIDs, uuid)
		}
		if flavors != nil {
			share(h.FlavorIDs, flavors.Share)
		}
	}
	return h, checkVersion(key, h)
}

// DecodeHostSyncReusing is DecodeHostSyncSharing into *h, whatever it
// held, with its uuids and flavor ids decoded into h's arrays (grown if
// short) on the fast path: a scheduler keeps nothing of a sync that
// agrees with its cache, so one HostSync serves every host's (100,000 at
// a cold start of 100,000 hosts, each two slices that were garbage at
// once). The value is Decode's, field for field; a caller that keeps a
// slice copies it.
func DecodeHostSyncReusing(key string, data []byte, h *HostSync, uuid func(b []byte) string, flavors StringSharer) error {
	uuids, ids := h.UUIDs[:0], h.FlavorIDs[:0]
	*h = HostSync{}
	if h.decodeFastInto(data, uuid, flavors, uuids, ids) {
		return checkVersion(key, h)
	}
	*h = HostSync{}
	got, err := DecodeHostSyncSharing(key, data, uuid, flavors)
	*h = *got
	return err
}
