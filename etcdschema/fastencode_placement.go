package etcdschema

import (
	"strconv"
	"time"
)

// The members below are in Provider's and Consumer's field order with
// their tags' names, as json.Marshal writes them (the embedded header's
// version first); a test compares the two byte for byte, so a field added
// to the struct but not here fails it.

// sizeHint is a little more than a provider's usual JSON, so Encode
// allocates its buffer once.
func (p *Provider) sizeHint() int {
	n := 256 + len(p.UUID) + len(p.Name) + len(p.ParentProviderUUID) + len(p.RootProviderUUID) +
		128*len(p.Inventories) + 40*len(p.Usages)
	for _, t := range p.Traits {
		n += len(t) + 3
	}
	for _, a := range p.Aggregates {
		n += len(a) + 3
	}
	return n
}

func (p *Provider) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(p.Version), 10)
	b = append(b, `,"uuid":`...)
	b = appendJSONString(b, p.UUID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, p.Name)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, p.Generation, 10)
	if p.ParentProviderUUID != "" {
		b = append(b, `,"parent_provider_uuid":`...)
		b = appendJSONString(b, p.ParentProviderUUID)
	}
	b = append(b, `,"root_provider_uuid":`...)
	b = appendJSONString(b, p.RootProviderUUID)
	b = append(b, `,"inventories":`...)
	var ok bool
	if b, ok = appendInventories(b, p.Inventories); !ok {
		return nil, false
	}
	if len(p.Traits) > 0 {
		b = append(b, `,"traits":`...)
		b = appendJSONStrings(b, p.Traits)
	}
	if len(p.Aggregates) > 0 {
		b = append(b, `,"aggregates":`...)
		b = appendJSONStrings(b, p.Aggregates)
	}
	b = append(b, `,"usages":`...)
	b = appendJSONInt64Map(b, p.Usages)
	return appendTimes(b, p.CreatedAt, p.UpdatedAt)
}

func (c *Consumer) sizeHint() int {
	n := 192 + len(c.UUID) + len(c.ProjectID) + len(c.UserID) + len(c.ConsumerType)
	for rp, a := range c.Allocations {
		n += len(rp) + 24 + 40*len(a.Resources)
	}
	return n
}

func (c *Consumer) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	b = append(b, `,"uuid":`...)
	b = appendJSONString(b, c.UUID)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, c.Generation, 10)
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, c.ProjectID)
	b = append(b, `,"user_id":`...)
	b = appendJSONString(b, c.UserID)
	if c.ConsumerType != "" {
		b = append(b, `,"consumer_type":`...)
		b = appendJSONString(b, c.ConsumerType)
	}
	b = append(b, `,"allocations":`...)
	if c.Allocations == nil {
		b = append(b, "null"...)
	} else {
		var buf [8]string
		b = append(b, '{')
		for i, rp := range sortedKeys(c.Allocations, buf[:]) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, rp)
			b = append(b, `:{"resources":`...)
			b = appendJSONInt64Map(b, c.Allocations[rp].Resources)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if o := c.Order; o != nil {
		// As json.Marshal writes the struct: omitempty members left out.
		b = append(b, `,"order":{`...)
		if len(o.Providers) > 0 {
			b = append(b, `"providers":`...)
			b = appendJSONStrings(b, o.Providers)
		}
		if len(o.Classes) > 0 {
			if len(o.Providers) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"classes":{`...)
			var buf [8]string
			for i, rp := range sortedKeys(o.Classes, buf[:]) {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, rp)
				b = append(b, ':')
				b = appendJSONStrings(b, o.Classes[rp])
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return appendTimes(b, c.CreatedAt, c.UpdatedAt)
}

// appendTimes appends both records' closing created_at and updated_at.
func appendTimes(b []byte, created, updated time.Time) ([]byte, bool) {
	var ok bool
	b = append(b, `,"created_at":`...)
	if b, ok = appendJSONTime(b, created); !ok {
		return nil, false
	}
	b = append(b, `,"updated_at":`...)
	if b, ok = appendJSONTime(b, updated); !ok {
		return nil, false
	}
	return append(b, '}'), true
}

// appendInventories appends a provider's (or a host's capacity's)
// inventories by resource class: null when nil, keys in json.Marshal's
// order.
func appendInventories(b []byte, invs map[string]Inventory) ([]byte, bool) {
	if invs == nil {
		return append(b, "null"...), true
	}
	var buf [8]string
	b = append(b, '{')
	for i, rc := range sortedKeys(invs, buf[:]) {
		inv := invs[rc]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, rc)
		b = append(b, `:{"total":`...)
		b = strconv.AppendInt(b, inv.Total, 10)
		if inv.Reserved != 0 {
			b = append(b, `,"reserved":`...)
			b = strconv.AppendInt(b, inv.Reserved, 10)
		}
		b = append(b, `,"min_unit":`...)
		b = strconv.AppendInt(b, inv.MinUnit, 10)
		b = append(b, `,"max_unit":`...)
		b = strconv.AppendInt(b, inv.MaxUnit, 10)
		b = append(b, `,"step_size":`...)
		b = strconv.AppendInt(b, inv.StepSize, 10)
		b = append(b, `,"allocation_ratio":`...)
		var ok bool
		if b, ok = appendJSONFloat(b, inv.AllocationRatio); !ok {
			return nil, false
		}
		b = append(b, '}')
	}
	return append(b, '}'), true
}
