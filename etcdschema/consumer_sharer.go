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
// provider uuid Provider knows is Provider's string. Not safe for
// concurrent use: one per goroutine.
type ConsumerSharer struct {
	// Provider returns the caller's string for a provider uuid (ok
	// false: it has none); nil copies every uuid. It must not keep uuid.
	Provider func(uuid []byte) (string, bool)
	last     *Consumer
	// resources are the last distinct resources maps decoded, the most
	// recent first.
	resources []map[string]int64
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

// remember makes c the record the next one shares strings with, and its
// resources maps the most recent.
func (sh *ConsumerSharer) remember(c *Consumer) {
	sh.last = c
	for _, a := range c.Allocations {
		if a.Resources == nil {
			continue
		}
		id := reflect.ValueOf(a.Resources).UnsafePointer()
		at := -1
		for i, m := range sh.resources {
			if reflect.ValueOf(m).UnsafePointer() == id {
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
