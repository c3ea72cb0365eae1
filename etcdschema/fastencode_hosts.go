package etcdschema

import "strconv"

// Every simulated or real host writes these in the background (its
// mapping checked on each provider sync, its capacity and its instance
// list periodically): at 10,000 hosts their json.Marshal was most of
// the reflection left in a boot's profile after the per-server records.
// Written as fastencode_placement.go writes the placement records, byte
// for byte json.Marshal's, compared by a test.

func (m *HostMapping) sizeHint() int { return 96 + len(m.Host) + len(m.Cell) }

func (m *HostMapping) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(m.Version), 10)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, m.Host)
	b = append(b, `,"cell":`...)
	b = appendJSONString(b, m.Cell)
	b = append(b, `,"created_at":`...)
	b, ok := appendJSONTime(b, m.CreatedAt)
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

func (h *HostSync) sizeHint() int { return 96 + len(h.Host) + 48*len(h.UUIDs) }

func (h *HostSync) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(h.Version), 10)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, h.Host)
	b = append(b, `,"uuids":`...)
	b = appendJSONStrings(b, h.UUIDs)
	if len(h.FlavorIDs) > 0 {
		b = append(b, `,"flavor_ids":`...)
		b = appendJSONStrings(b, h.FlavorIDs)
	}
	b = append(b, `,"at":`...)
	b, ok := appendJSONTime(b, h.At)
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

func (c *HostCapacity) sizeHint() int {
	return 96 + len(c.Host) + 160*len(c.Inventories) + 32*len(c.Used)
}

func (c *HostCapacity) appendJSON(b []byte) ([]byte, bool) {
	var ok bool
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, c.Host)
	b = append(b, `,"inventories":`...)
	if b, ok = appendInventories(b, c.Inventories); !ok {
		return nil, false
	}
	b = append(b, `,"used":`...)
	b = appendJSONInt64Map(b, c.Used)
	b = append(b, `,"at":`...)
	if b, ok = appendJSONTime(b, c.At); !ok {
		return nil, false
	}
	return append(b, '}'), true
}
