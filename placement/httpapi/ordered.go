package httpapi

import (
	"bytes"
	"encoding/json"
)

// orderedObject is a JSON object whose members keep the order they were
// added in. Placement builds its answers as Python dicts, so where it
// fills one in an order of its own (resource classes by class id, a
// consumer's allocations in the order they were written) the members
// come in that order; a Go map would sort them.
type orderedObject []member

type member struct {
	key   string
	value any
}

// set adds key, or replaces its value where it already is (a dict's
// assignment).
func (o *orderedObject) set(key string, value any) {
	for i := range *o {
		if (*o)[i].key == key {
			(*o)[i].value = value
			return
		}
	}
	*o = append(*o, member{key, value})
}

// MarshalJSON writes the members in order.
func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// amountsIn is amounts as an object whose classes come in order (every
// key of amounts must be in order).
func amountsIn(order []string, amounts map[string]int64) orderedObject {
	out := make(orderedObject, 0, len(amounts))
	for _, rc := range order {
		if n, ok := amounts[rc]; ok {
			out = append(out, member{rc, n})
		}
	}
	return out
}
