package etcdschema

// A scheduler's cold start decodes every host's Service and HostSync
// (100,000 of each at 100,000 hosts) beside the InstanceInfos; these read
// them as fastdecode_placement.go reads the placement records, with the
// same rules: exact names, each once, null only for the slice, a copy
// stored only on success.

func (s *Service) decodeFast(data []byte) bool {
	q := *s
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1
		case "host":
			q.Host, ok = r.string()
			bit = 2
		case "cell":
			q.Cell, ok = r.string()
			bit = 4
		case "provider_uuid":
			q.ProviderUUID, ok = r.string()
			bit = 8
		case "disabled":
			q.Disabled, ok = r.bool()
			bit = 16
		case "disabled_reason":
			q.DisabledReason, ok = r.string()
			bit = 32
		case "forced_down":
			q.ForcedDown, ok = r.bool()
			bit = 64
		case "agent_version":
			q.AgentVersion, ok = r.string()
			bit = 128
		case "failed_builds":
			var n int64
			n, ok = r.int64()
			q.FailedBuilds, bit = int(n), 256
		case "can_live_migrate":
			q.CanLiveMigrate, ok = r.bool()
			bit = 2048
		case "created_at":
			q.CreatedAt, ok = r.time()
			bit = 512
		case "updated_at":
			q.UpdatedAt, ok = r.time()
			bit = 1024
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*s = q
	return true
}

func (h *HostSync) decodeFast(data []byte) bool { return h.decodeFastSharing(data, nil, nil) }

// decodeFastSharing is decodeFast taking each uuid from uuid and each
// flavor id from flavors (either nil: a copy of its own).
func (h *HostSync) decodeFastSharing(data []byte, uuid func(b []byte) string, flavors StringSharer) bool {
	if h.UUIDs != nil || h.FlavorIDs != nil {
		return false // encoding/json would reuse its arrays
	}
	return h.decodeFastInto(data, uuid, flavors, nil, nil)
}

// decodeFastInto is decodeFastSharing with the uuids and flavor ids
// decoded into the arrays of uuids and ids (nil: new ones).
func (h *HostSync) decodeFastInto(data []byte, uuid func(b []byte) string, flavors StringSharer, uuids, ids []string) bool {
	var flavor func(b []byte) string
	if flavors != nil {
		flavor = flavors.Share
	}
	q := *h
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1
		case "host":
			q.Host, ok = r.string()
			bit = 2
		case "uuids":
			q.UUIDs, ok = r.stringsInto(uuids, uuid)
			bit = 4
		case "at":
			q.At, ok = r.time()
			bit = 8
		case "flavor_ids":
			q.FlavorIDs, ok = r.stringsInto(ids, flavor)
			bit = 16
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*h = q
	return true
}

// Every scheduler follows every host's mapping as hosts register.
func (m *HostMapping) decodeFast(data []byte) bool {
	q := *m
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1
		case "host":
			q.Host, ok = r.string()
			bit = 2
		case "cell":
			q.Cell, ok = r.string()
			bit = 4
		case "created_at":
			q.CreatedAt, ok = r.time()
			bit = 8
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*m = q
	return true
}

// Every scheduler's host manager follows every host's capacity record,
// rewritten as the host's instances come and go.
func (c *HostCapacity) decodeFast(data []byte) bool {
	return c.decodeFastShared(data, false)
}

// DecodeHostCapacityShared is Decode of a host's capacity record whose
// inventories and usage are the shared maps of equal values decoded
// before (inventory_table.go), which no caller may mutate: every
// scheduler's host manager holds every host's, re-decoded at each
// capacity report.
func DecodeHostCapacityShared(key string, data []byte) (*HostCapacity, error) {
	c := &HostCapacity{}
	if c.decodeFastShared(data, true) && versionReadable(c) {
		return c, nil
	}
	c = &HostCapacity{}
	return c, Decode(key, data, c)
}

func (c *HostCapacity) decodeFastShared(data []byte, shared bool) bool {
	if c.Inventories != nil || c.Used != nil {
		return false // encoding/json would merge into the existing maps
	}
	q := *c
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1
		case "host":
			q.Host, ok = r.string()
			bit = 2
		case "inventories":
			if shared {
				q.Inventories, ok = r.inventoriesShared(nil)
			} else {
				q.Inventories, ok = r.inventories()
			}
			bit = 4
		case "used":
			if shared {
				q.Used, ok = r.usagesShared()
			} else {
				q.Used, ok = r.int64Map()
			}
			bit = 8
		case "at":
			q.At, ok = r.time()
			bit = 16
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*c = q
	return true
}
