package etcdschema

// Provider and Consumer records are decoded by every placement index on
// every claim (each claim rewrites one of each) and a million consumers at
// a scheduler's cold start; encoding/json's reflection was the largest
// Berth-side CPU cost of a claim. These read the JSON that Encode writes
// (and the same JSON in any member order or whitespace) without it.
//
// Each decodes into a copy and stores it only on success, so a value the
// fast path declines halfway reaches encoding/json as it was. A
// destination whose maps or slices are already set is declined too:
// encoding/json merges into an existing map and reuses a slice's array.
// Every member name must be the field's exact name and appear once
// (encoding/json also matches names case-insensitively, lets a repeated
// name win or merge, and ignores unknown names); null is read only for a
// map or a slice (nil, as encoding/json sets it and json.Marshal writes
// a nil one), declined elsewhere.

// Bits of the members seen, to decline a repeated one.
const (
	seenVersion = 1 << iota
	seenUUID
	seenName
	seenGeneration
	seenParent
	seenRoot
	seenInventories
	seenTraits
	seenAggregates
	seenUsages
	seenCreated
	seenUpdated
	seenProject
	seenUser
	seenConsumerType
	seenAllocations
)

// once records bit in seen, reporting false if it was there already.
func once(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func (p *Provider) decodeFast(data []byte) bool {
	if p.Inventories != nil || p.Traits != nil || p.Aggregates != nil || p.Usages != nil {
		return false
	}
	q := *p
	r := jsonReader{data: data}
	var seen uint32
	ok := r.object(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version = int(n)
			return ok && once(&seen, seenVersion)
		case "uuid":
			q.UUID, ok = r.string()
			return ok && once(&seen, seenUUID)
		case "name":
			q.Name, ok = r.string()
			return ok && once(&seen, seenName)
		case "generation":
			q.Generation, ok = r.int64()
			return ok && once(&seen, seenGeneration)
		case "parent_provider_uuid":
			q.ParentProviderUUID, ok = r.string()
			return ok && once(&seen, seenParent)
		case "root_provider_uuid":
			q.RootProviderUUID, ok = r.string()
			return ok && once(&seen, seenRoot)
		case "inventories":
			q.Inventories, ok = r.inventories()
			return ok && once(&seen, seenInventories)
		case "traits":
			q.Traits, ok = r.strings()
			return ok && once(&seen, seenTraits)
		case "aggregates":
			q.Aggregates, ok = r.strings()
			return ok && once(&seen, seenAggregates)
		case "usages":
			q.Usages, ok = r.int64Map()
			return ok && once(&seen, seenUsages)
		case "created_at":
			q.CreatedAt, ok = r.time()
			return ok && once(&seen, seenCreated)
		case "updated_at":
			q.UpdatedAt, ok = r.time()
			return ok && once(&seen, seenUpdated)
		}
		return false
	})
	if !ok || !r.end() {
		return false
	}
	*p = q
	return true
}

// inventories reads a provider's map of Inventory objects.
func (r *jsonReader) inventories() (map[string]Inventory, bool) {
	if r.null() {
		return nil, true
	}
	m := make(map[string]Inventory, 4)
	ok := r.object(func(rc []byte) bool {
		if _, dup := m[string(rc)]; dup {
			return false
		}
		var inv Inventory
		var seen uint32
		ok := r.object(func(name []byte) bool {
			var ok bool
			var bit uint32
			switch string(name) {
			case "total":
				inv.Total, ok = r.int64()
				bit = 1
			case "reserved":
				inv.Reserved, ok = r.int64()
				bit = 2
			case "min_unit":
				inv.MinUnit, ok = r.int64()
				bit = 4
			case "max_unit":
				inv.MaxUnit, ok = r.int64()
				bit = 8
			case "step_size":
				inv.StepSize, ok = r.int64()
				bit = 16
			case "allocation_ratio":
				inv.AllocationRatio, ok = r.float64()
				bit = 32
			}
			return ok && once(&seen, bit)
		})
		if !ok {
			return false
		}
		m[internName(rc)] = inv
		return true
	})
	return m, ok
}

func (c *Consumer) decodeFast(data []byte) bool {
	if c.Allocations != nil {
		return false
	}
	q := *c
	r := jsonReader{data: data}
	var seen uint32
	ok := r.object(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version = int(n)
			return ok && once(&seen, seenVersion)
		case "uuid":
			q.UUID, ok = r.string()
			return ok && once(&seen, seenUUID)
		case "generation":
			q.Generation, ok = r.int64()
			return ok && once(&seen, seenGeneration)
		case "project_id":
			q.ProjectID, ok = r.string()
			return ok && once(&seen, seenProject)
		case "user_id":
			q.UserID, ok = r.string()
			return ok && once(&seen, seenUser)
		case "consumer_type":
			q.ConsumerType, ok = r.string()
			return ok && once(&seen, seenConsumerType)
		case "allocations":
			q.Allocations, ok = r.allocations()
			return ok && once(&seen, seenAllocations)
		case "created_at":
			q.CreatedAt, ok = r.time()
			return ok && once(&seen, seenCreated)
		case "updated_at":
			q.UpdatedAt, ok = r.time()
			return ok && once(&seen, seenUpdated)
		}
		return false
	})
	if !ok || !r.end() {
		return false
	}
	*c = q
	return true
}

// allocations reads a consumer's map of provider uuid to
// {"resources": {class: amount}}.
func (r *jsonReader) allocations() (map[string]ConsumerAllocation, bool) {
	if r.null() {
		return nil, true
	}
	m := make(map[string]ConsumerAllocation, 1)
	ok := r.object(func(rp []byte) bool {
		if _, dup := m[string(rp)]; dup {
			return false
		}
		var a ConsumerAllocation
		seen := false
		ok := r.object(func(name []byte) bool {
			if string(name) != "resources" || seen {
				return false
			}
			seen = true
			var ok bool
			a.Resources, ok = r.int64Map()
			return ok
		})
		if !ok {
			return false
		}
		m[string(rp)] = a
		return true
	})
	return m, ok
}
