package etcdschema

import "strings"

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
	seenOrder
)

// once records bit in seen, reporting false if it was there already.
func once(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// members reads an object whose members member reads, each giving its
// own bit: an unknown member (ok false) or one read twice declines the
// whole value, as the rules above say.
func (r *jsonReader) members(member func(name []byte) (bit uint32, ok bool)) bool {
	var seen uint32
	return r.object(func(name []byte) bool {
		bit, ok := member(name)
		return ok && once(&seen, bit)
	})
}

func (p *Provider) decodeFast(data []byte) bool {
	return p.decodeFastAfter(data, nil, false)
}

// DecodeProviderAfter is Decode of a provider record into a new Provider
// that shares with prev (the record it replaces, may be nil; which
// neither may mutate) every part it reads equal to prev's: strings,
// inventories, traits, aggregates. Every scheduler decodes the provider
// of every claim, and a claim changes only its usages and generation.
// Its inventories are otherwise the shared map of equal inventories
// decoded before (inventory_table.go), and so are its usages, traits and
// aggregates when not prev's: read-only too. The value and the error are
// exactly Decode's.
func DecodeProviderAfter(key string, data []byte, prev *Provider) (*Provider, error) {
	p := &Provider{}
	if p.decodeFastAfter(data, prev, true) {
		return p, checkVersion(key, p)
	}
	return p, Decode(key, data, p)
}

// DecodeProviderAfterKey is DecodeProviderAfter for a key still in the
// bytes a watch event carries: the key's string, which only an error
// message needs, is made only on the path that may fail. A placement
// index follows every claim's provider put this way.
func DecodeProviderAfterKey(key, data []byte, prev *Provider) (*Provider, error) {
	p := &Provider{}
	if p.decodeFastAfter(data, prev, true) && versionReadable(p) {
		return p, nil
	}
	return DecodeProviderAfter(string(key), data, prev)
}

// DecodeConsumerKey is Decode of a consumer record stored at key (bytes,
// as a watch event carries it) whose uuid the caller has as a string
// already (the key's last segment): the record's uuid shares that string
// when equal, its project, user and consumer type share like's (may be
// nil: a consumer decoded before, which neither may mutate) when equal
// (a project's servers follow one another), and the key's string is made
// only on the path that may fail; an allocation's provider uuid equal to
// one of rps (the providers the caller knows, e.g. those written in the
// same transaction) is that string. The value and the error are exactly
// Decode's.
func DecodeConsumerKey(key, data []byte, uuid string, like *Consumer, rps []string) (*Consumer, error) {
	c := &Consumer{}
	if c.decodeFastAs(data, uuid, like, rps, nil) && versionReadable(c) {
		return c, nil
	}
	c = &Consumer{}
	return c, Decode(string(key), data, c)
}

// versionReadable is checkVersion without its error.
func versionReadable(v Versioned) bool {
	got := v.storedVersion()
	return got >= 1 && got <= v.SchemaVersion()
}

// decodeFastAfter decodes into p sharing prev's equal parts, and with
// shared the table's inventories (see DecodeProviderAfter).
func (p *Provider) decodeFastAfter(data []byte, prev *Provider, shared bool) bool {
	if p.Inventories != nil || p.Traits != nil || p.Aggregates != nil || p.Usages != nil {
		return false
	}
	var was Provider // prev's parts, or none
	if prev != nil {
		was = *prev
	}
	q := *p
	r := jsonReader{data: data}
	var seen uint32
	var uuid, name, parent, root []byte // the strings' bytes, in data
	ok := r.object(func(member []byte) bool {
		var ok bool
		switch string(member) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version = int(n)
			return ok && once(&seen, seenVersion)
		case "uuid":
			uuid, ok = r.str()
			return ok && once(&seen, seenUUID)
		case "name":
			name, ok = r.str()
			return ok && once(&seen, seenName)
		case "generation":
			q.Generation, ok = r.int64()
			return ok && once(&seen, seenGeneration)
		case "parent_provider_uuid":
			parent, ok = r.str()
			return ok && once(&seen, seenParent)
		case "root_provider_uuid":
			root, ok = r.str()
			return ok && once(&seen, seenRoot)
		case "inventories":
			if shared {
				q.Inventories, ok = r.inventoriesShared(was.Inventories)
			} else {
				q.Inventories, ok = r.inventories()
			}
			return ok && once(&seen, seenInventories)
		case "traits":
			if shared {
				q.Traits, ok = r.stringsShared(was.Traits)
			} else {
				q.Traits, ok = r.stringsAs(was.Traits)
			}
			return ok && once(&seen, seenTraits)
		case "aggregates":
			if shared {
				q.Aggregates, ok = r.stringsShared(was.Aggregates)
			} else {
				q.Aggregates, ok = r.stringsAs(was.Aggregates)
			}
			return ok && once(&seen, seenAggregates)
		case "usages":
			if shared {
				q.Usages, ok = r.usagesShared()
			} else {
				q.Usages, ok = r.int64Map()
			}
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
	q.UUID, q.Name, q.ParentProviderUUID, q.RootProviderUUID = providerStrings(&q, &was, seen, uuid, name, parent, root)
	*p = q
	return true
}

// providerStrings makes a provider's uuid, name, parent and root (those
// seen; the others as q has them, as encoding/json leaves them) from
// their bytes:
// each equal to was's is was's, a root equal to the uuid is the uuid's
// string, and the rest share one new string. An index keeps every
// provider's record: at 100,000 hosts these were three strings per host
// per index (uuid, name, root), each an object a collection marks; now
// one, and none after a claim.
func providerStrings(q, was *Provider, seen uint32, uuid, name, parent, root []byte) (u, n, pa, ro string) {
	var fresh [4][]byte // the ones to copy, in the order of the results
	size := 0
	take := func(b []byte, bit uint32, was, unseen string, i int) string {
		if seen&bit == 0 {
			return unseen
		}
		if string(b) == was {
			return was
		}
		fresh[i] = b
		size += len(b)
		return ""
	}
	u = take(uuid, seenUUID, was.UUID, q.UUID, 0)
	n = take(name, seenName, was.Name, q.Name, 1)
	pa = take(parent, seenParent, was.ParentProviderUUID, q.ParentProviderUUID, 2)
	rootIsUUID := seen&seenRoot != 0 && seen&seenUUID != 0 && string(root) == string(uuid)
	if !rootIsUUID {
		ro = take(root, seenRoot, was.RootProviderUUID, q.RootProviderUUID, 3)
	}
	if size > 0 {
		var all strings.Builder // one allocation, which String does not copy
		all.Grow(size)
		for _, b := range fresh {
			all.Write(b)
		}
		joined := all.String()
		next := func(i int) string {
			s := joined[:len(fresh[i])]
			joined = joined[len(fresh[i]):]
			return s
		}
		if fresh[0] != nil {
			u = next(0)
		}
		if fresh[1] != nil {
			n = next(1)
		}
		if fresh[2] != nil {
			pa = next(2)
		}
		if fresh[3] != nil {
			ro = next(3)
		}
	}
	if rootIsUUID {
		ro = u
	}
	return u, n, pa, ro
}

// int64MapAs reads an object of integers as int64Map does, returning the
// first of was (maps neither caller may mutate) that holds exactly its
// members, instead of a new map.
func (r *jsonReader) int64MapAs(was []map[string]int64) (map[string]int64, bool) {
	if len(was) == 0 {
		return r.int64Map()
	}
	if r.null() {
		return nil, true
	}
	var buf [8]int64Entry
	entries, ok := r.int64Entries(buf[:0])
	if !ok {
		return nil, false
	}
	for _, w := range was {
		same := len(w) == len(entries)
		for i := 0; same && i < len(entries); i++ {
			n, found := w[string(entries[i].name)]
			same = found && n == entries[i].n
		}
		if same {
			return w, true
		}
	}
	m := make(map[string]int64, max(4, len(entries)))
	for _, e := range entries {
		m[internName(e.name)] = e.n
	}
	return m, true
}

// int64Entry is one member of an object of integers, its name still the
// record's bytes: what int64MapAs and usagesShared compare and look up
// before they make a map, if they make one.
type int64Entry struct {
	name []byte
	n    int64
}

// int64Entries reads an object of integers into entries (appended to
// buf), declining a repeated name as int64Map does.
func (r *jsonReader) int64Entries(buf []int64Entry) ([]int64Entry, bool) {
	entries := buf
	ok := r.object(func(name []byte) bool {
		n, ok := r.int64()
		if !ok {
			return false
		}
		for _, e := range entries {
			if string(e.name) == string(name) {
				return false // repeated, as int64Map declines it
			}
		}
		entries = append(entries, int64Entry{name, n})
		return true
	})
	return entries, ok
}

// stringIn is b as a string: the one of known equal to it, else a copy.
func stringIn(b []byte, known []string) string {
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

// stringAs reads a string for a string field, returning was itself when
// equal (no copy).
func (r *jsonReader) stringAs(was string) (string, bool) {
	s, ok := r.str()
	if !ok {
		return "", false
	}
	if string(s) == was {
		return was, true
	}
	return string(s), true
}

// stringsAs reads an array of strings as strings does, returning was (or
// the part of it read) when its elements are was's, capped at its length
// so that an append to either record's slice copies.
func (r *jsonReader) stringsAs(was []string) ([]string, bool) {
	if r.null() {
		return nil, true
	}
	if !r.next('[') {
		return nil, false
	}
	if r.next(']') {
		if was != nil && len(was) == 0 {
			return was[:0:0], true
		}
		return []string{}, true
	}
	var out []string // nil while the elements are was's
	n := 0
	for {
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		if out == nil && n < len(was) && string(s) == was[n] {
			n++
		} else {
			if out == nil {
				out = append(make([]string, 0, n+4), was[:n]...)
			}
			out = append(out, string(s))
		}
		if r.next(',') {
			continue
		}
		if !r.next(']') {
			return nil, false
		}
		if out == nil {
			return was[:n:n], true
		}
		return out, true
	}
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
		inv, ok := r.inventory()
		if !ok {
			return false
		}
		m[internName(rc)] = inv
		return true
	})
	return m, ok
}

// inventory reads one Inventory object.
func (r *jsonReader) inventory() (Inventory, bool) {
	var inv Inventory
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
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
		return
	})
	return inv, ok
}

func (c *Consumer) decodeFast(data []byte) bool { return c.decodeFastAs(data, "", nil, nil, nil) }

// decodeFastAs is decodeFast reading a uuid equal to uuid as uuid itself,
// strings equal to like's (nil: none) as like's, and provider uuids equal
// to one of rps as that one. With sh (may be nil) provider uuids are
// sh.Provider's strings and resources maps equal to one sh holds are
// that map (like's are then not looked at: sh holds them).
func (c *Consumer) decodeFastAs(data []byte, uuid string, like *Consumer, rps []string, sh *ConsumerSharer) bool {
	if c.Allocations != nil {
		return false
	}
	var wasC Consumer
	// like's resources maps: a server's allocation is usually its
	// flavor's, the same as the server's before.
	var wasBuf [4]map[string]int64
	was := wasBuf[:0]
	if like != nil {
		wasC = *like
	}
	if sh != nil {
		was = sh.resources
	} else if like != nil {
		for _, a := range like.Allocations {
			if len(was) < len(wasBuf) && a.Resources != nil {
				was = append(was, a.Resources)
			}
		}
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
			q.UUID, ok = r.stringAs(uuid)
			return ok && once(&seen, seenUUID)
		case "generation":
			q.Generation, ok = r.int64()
			return ok && once(&seen, seenGeneration)
		case "project_id":
			q.ProjectID, ok = r.stringAs(wasC.ProjectID)
			return ok && once(&seen, seenProject)
		case "user_id":
			q.UserID, ok = r.stringAs(wasC.UserID)
			return ok && once(&seen, seenUser)
		case "consumer_type":
			q.ConsumerType, ok = r.stringAs(wasC.ConsumerType)
			return ok && once(&seen, seenConsumerType)
		case "allocations":
			q.Allocations, ok = r.allocations(rps, was, sh)
			return ok && once(&seen, seenAllocations)
		case "order":
			q.Order, ok = r.allocationOrder()
			return ok && once(&seen, seenOrder)
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
// {"resources": {class: amount}}; a provider uuid is sh's string for it
// when sh (may be nil) has one, else one of rps or a copy, and a single
// provider's allocation equal to the one sh last saw on that provider is
// that map.
func (r *jsonReader) allocations(rps []string, was []map[string]int64, sh *ConsumerSharer) (map[string]ConsumerAllocation, bool) {
	if r.null() {
		return nil, true
	}
	// The first provider is held apart until a second one comes: most
	// consumers have one, whose map sh may already hold.
	var m map[string]ConsumerAllocation
	var firstRP string
	var first ConsumerAllocation
	n := 0
	ok := r.object(func(rp []byte) bool {
		if n == 1 && string(rp) == firstRP {
			return false
		}
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
			a.Resources, ok = r.int64MapAs(was)
			return ok
		})
		if !ok {
			return false
		}
		name, known := "", false
		if sh != nil && sh.Provider != nil {
			name, known = sh.Provider(rp)
		}
		if !known {
			name = stringIn(rp, rps)
		}
		n++
		switch n {
		case 1:
			firstRP, first = name, a
		case 2:
			m = make(map[string]ConsumerAllocation, 2)
			m[firstRP] = first
			fallthrough
		default:
			m[name] = a
		}
		return true
	})
	if !ok {
		return nil, false
	}
	switch {
	case n == 0:
		return make(map[string]ConsumerAllocation, 1), true
	case n == 1 && sh != nil:
		return sh.allocationsOn(firstRP, first), true
	case n == 1:
		return map[string]ConsumerAllocation{firstRP: first}, true
	}
	return m, true
}

// allocationOrder reads a consumer's {"providers": [...], "classes":
// {provider: [...]}} (either member may be absent; null reads as nil).
func (r *jsonReader) allocationOrder() (*AllocationOrder, bool) {
	if r.null() {
		return nil, true
	}
	o := &AllocationOrder{}
	seenProviders, seenClasses := false, false
	ok := r.object(func(name []byte) bool {
		var ok bool
		switch {
		case string(name) == "providers" && !seenProviders:
			seenProviders = true
			o.Providers, ok = r.strings()
		case string(name) == "classes" && !seenClasses:
			seenClasses = true
			if r.null() {
				return true
			}
			o.Classes = map[string][]string{}
			ok = r.object(func(rp []byte) bool {
				if _, dup := o.Classes[string(rp)]; dup {
					return false
				}
				cs, ok := r.strings()
				o.Classes[string(rp)] = cs
				return ok
			})
		}
		return ok
	})
	return o, ok
}
