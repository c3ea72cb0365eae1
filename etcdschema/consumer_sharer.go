package etcdschema

import "reflect"

// sharedResources is how many distinct resources maps a ConsumerSharer
// keeps to share: a cloud's allocations are its flavors', a handful of
// shapes repeated over every server.
const sharedResources = 8

// ConsumerSharer decodes a run of consumer records (a list's pages, on
// one goroutine) so that what they have in common is held once: a
// scheduler's cold start keeps every consumer of the cloud (a million at
// 100,000 hosts), and a fresh copy of each one's resources map and
// provider uuid was a quarter of its heap. A record's resources map equal
// to one of the last distinct ones decoded is that map (records share it:
// neither may be mutated, as DecodeConsumerKey's), its project, user and
// consumer type equal to the previous record's are those strings, and a
// provider uuid Provider knows is Provider's string. A consumer whose
// allocation is on one provider and equal to the last such one on that
// provider (a host's servers of one flavor) shares that one's map. Not
// safe for
// concurrent use: one per goroutine.
type ConsumerSharer struct {
	// Provider returns the caller's string for a provider uuid (ok
	// false: it has none); nil copies every uuid. It must not keep uuid.
	Provider func(uuid []byte) (string, bool)
	last     *Consumer
	// resources are the last distinct resources maps decoded, the most
	// recent first.
	resources []map[string]int64
	// onProvider is, by provider uuid, the last single-provider
	// allocations map decoded on it.
	onProvider map[string]map[string]ConsumerAllocation
}

// Decode is Decode of the consumer record stored at key, sharing as the
// type says. The value and the error are exactly Decode's.
func (sh *ConsumerSharer) Decode(key, data []byte) (*Consumer, error) {
	c := &Consumer{}
	if c.decodeFastAs(data, "", sh.last, nil, sh) && versionReadable(c) {
		sh.remember(c)
		return c, nil
	}
	c = &Consumer{}
	return c, Decode(string(key), data, c)
}

// allocationsOn is the allocations map of a consumer on provider rp
// alone with a: the last one made for rp when its allocation is a
// (resources maps compare by identity: equal ones are shared already),
// else a new one that becomes rp's.
func (sh *ConsumerSharer) allocationsOn(rp string, a ConsumerAllocation) map[string]ConsumerAllocation {
	if m, ok := sh.onProvider[rp]; ok && sameMap(m[rp].Resources, a.Resources) {
		return m
	}
	m := map[string]ConsumerAllocation{rp: a}
	if sh.onProvider == nil {
		sh.onProvider = make(map[string]map[string]ConsumerAllocation)
	}
	sh.onProvider[rp] = m
	return m
}

// sameMap says whether a and b are one map (both nil included).
func sameMap(a, b map[string]int64) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// remember makes c the record the next one shares strings with, and its
// resources maps the most recent.
func (sh *ConsumerSharer) remember(c *Consumer) {
	sh.last = c
	for _, a := range c.Allocations {
		if a.Resources == nil {
			continue
		}
		at := -1
		for i, m := range sh.resources {
			if sameMap(m, a.Resources) {
				at = i
				break
			}
		}
		switch {
		case at == 0:
		case at > 0:
			copy(sh.resources[1:at+1], sh.resources[:at])
			sh.resources[0] = a.Resources
		default:
			if len(sh.resources) < sharedResources {
				sh.resources = append(sh.resources, nil)
			}
			copy(sh.resources[1:], sh.resources[:len(sh.resources)-1])
			sh.resources[0] = a.Resources
		}
	}
}
