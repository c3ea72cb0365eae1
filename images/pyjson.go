package images

import "github.com/berth-project/berth/internal/pycompat"

// obj is a JSON object whose members keep their order: Glance builds its
// answers as Python dicts and writes them with json.dumps, so members
// come in insertion order.
type obj []member

type member struct {
	k string
	v any // obj, []any, []string, string, *string, int, bool or nil
}

// EachMember makes an obj a pycompat.Object.
func (o obj) EachMember(f func(k string, v any)) {
	for _, m := range o {
		f(m.k, m.v)
	}
}

// dumps is json.dumps(v, ensure_ascii=False) as oslo's jsonutils (and so
// Glance) calls it: ", " and ": " separators, non-ASCII written as it
// is, <, > and & plainly (pycompat.DumpsUnicode).
func dumps(v any) []byte { return pycompat.DumpsUnicode(v) }
