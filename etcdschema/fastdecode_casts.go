package etcdschema

import "encoding/json"

// Every scheduler follows every write under the hosts prefix and the
// queue prefixes, so each extra scheduler decodes every build cast (the
// host manager counts a host's casts for the IoOpsWeigher) and every
// superconductor lease (the queue's holder affinity): encoding/json's
// reflection on these was most of an extra scheduler's watch handling.
// These read them as fastdecode_placement.go reads the placement records,
// with the same rules: exact names, each once, null only for a map, a
// copy stored only on success (a value declined halfway reaches
// encoding/json as it was).

func (b *Build) decodeFast(data []byte) bool {
	if !b.Flavor.fastDecodable() || b.Image != nil || b.Instance != nil || b.Alternates != nil {
		return false // encoding/json would merge into the existing map or image, or reuse a raw value's array
	}
	q := *b
	if !q.read(data, true) {
		return false
	}
	*b = q
	return true
}

// read decodes a cast into b; with keep false it reads and checks every
// member as with keep true but copies no string out of data (BuildOp).
func (b *Build) read(data []byte, keep bool) bool {
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			b.Version, bit = int(n), 1
		case "op":
			b.Op, ok = r.opString()
			bit = 2
		case "instance_uuid":
			b.InstanceUUID, ok = r.stringIf(keep)
			bit = 4
		case "name":
			b.Name, ok = r.stringIf(keep)
			bit = 8
		case "cell":
			b.Cell, ok = r.stringIf(keep)
			bit = 16
		case "flavor":
			// Into b's own Flavor, as encoding/json decodes into the
			// existing struct (members the input lacks are kept).
			ok = r.flavor(&b.Flavor, keep)
			bit = 32
		case "project_id":
			b.ProjectID, ok = r.stringIf(keep)
			bit = 64
		case "user_id":
			b.UserID, ok = r.stringIf(keep)
			bit = 128
		case "attempt":
			var n int64
			n, ok = r.int64()
			b.Attempt, bit = int(n), 256
		case "request_id":
			b.RequestID, ok = r.stringIf(keep)
			bit = 512
		case "cast_at":
			b.CastAt, ok = r.time()
			bit = 1024
		case "image":
			b.Image, ok = r.image(keep)
			bit = 2048
		case "instance":
			// Without keep, the bytes themselves (no copy), which
			// BuildOp checks for a version 2 cast and then drops.
			b.Instance, ok = r.rawSpan(keep)
			bit = 4096
		case "alternates":
			b.Alternates, ok = r.rawIf(keep)
			bit = 8192
		}
		return
	})
	return ok && r.end()
}

// BuildOp is the part of a Build cast that a scheduler's host manager
// keeps: its op (a build in flight counts toward the host's io ops).
// Decode reads and checks the whole record exactly as into a fresh Build
// — a value that fails as a Build fails as a BuildOp, with the same error
// — but copies none of its strings: every scheduler decodes every cast.
type BuildOp struct {
	header
	Op string
	// instance is the carried instance's bytes while Decode checks a
	// version 2 cast (complete); nil after.
	instance []byte
}

func (*BuildOp) SchemaVersion() int { return BuildVersion }

// UnmarshalJSON (encoding/json's path, where the fast one declines)
// decodes a whole Build and keeps its version and op: the record is
// checked as a Build is, and every field is replaced.
func (o *BuildOp) UnmarshalJSON(data []byte) error {
	var b Build
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	o.Version, o.Op, o.instance = b.Version, b.Op, b.Instance
	return nil
}

func (o *BuildOp) decodeFast(data []byte) bool {
	var b Build
	if !b.read(data, false) {
		return false
	}
	o.Version, o.Op, o.instance = b.Version, b.Op, b.Instance
	return true
}

// stringIf reads a string for a string field, returning it only if keep
// (read and checked either way).
func (r *jsonReader) stringIf(keep bool) (string, bool) {
	if keep {
		return r.string()
	}
	_, ok := r.str()
	return "", ok
}

// opString reads a cast's op, shared for the two ops Berth writes (every
// follower keeps its casts' ops; no copy of "build" per cast).
func (r *jsonReader) opString() (string, bool) {
	s, ok := r.str()
	if !ok {
		return "", false
	}
	switch string(s) {
	case OpBuild:
		return OpBuild, true
	case OpDelete:
		return OpDelete, true
	}
	return string(s), true
}

// flavor reads a Flavor object into f (f.fastDecodable(): the caller
// checked). null is declined: encoding/json leaves a struct as it is for
// null, which the rules here leave to it.
func (r *jsonReader) flavor(f *Flavor, keep bool) bool {
	return r.members(func(name []byte) (bit uint32, ok bool) {
		var n int64
		switch string(name) {
		case "version":
			n, ok = r.int64()
			f.Version, bit = int(n), 1
		case "id":
			f.ID, ok = r.stringIf(keep)
			bit = 2
		case "name":
			f.Name, ok = r.stringIf(keep)
			bit = 4
		case "vcpus":
			n, ok = r.int64()
			f.VCPUs, bit = int(n), 8
		case "ram":
			n, ok = r.int64()
			f.RAMMB, bit = int(n), 16
		case "disk":
			n, ok = r.int64()
			f.DiskGB, bit = int(n), 32
		case "ephemeral":
			n, ok = r.int64()
			f.EphemeralGB, bit = int(n), 64
		case "swap":
			n, ok = r.int64()
			f.SwapMB, bit = int(n), 128
		case "extra_specs":
			f.ExtraSpecs, ok = r.stringMap()
			bit = 256
		case "description":
			f.Description, ok = r.stringPtr()
			bit = 512
		case "rxtx_factor":
			f.RXTXFactor, ok = r.float64()
			bit = 1024
		case "private":
			f.Private, ok = r.bool()
			bit = 2048
		case "projects":
			f.Projects, ok = r.strings()
			bit = 4096
		}
		return
	})
}

// image reads a cast's Image into a new one; null gives nil, as
// encoding/json sets a pointer for null.
func (r *jsonReader) image(keep bool) (*BootImage, bool) {
	if r.null() {
		return nil, true
	}
	im := &BootImage{}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "id":
			im.ID, ok = r.stringIf(keep)
			bit = 1
		case "name":
			im.Name, ok = r.stringIf(keep)
			bit = 2
		case "command":
			im.Command, ok = r.strings()
			bit = 4
		}
		return
	})
	return im, ok
}

// stringMap reads an object of strings into a new map (non-nil even when
// empty, as encoding/json makes it; nil for null). A repeated name is
// declined.
func (r *jsonReader) stringMap() (map[string]string, bool) {
	if r.null() {
		return nil, true
	}
	m := make(map[string]string, 2)
	ok := r.object(func(name []byte) bool {
		v, ok := r.string()
		if !ok {
			return false
		}
		if _, dup := m[string(name)]; dup {
			return false
		}
		m[string(name)] = v
		return true
	})
	return m, ok
}

func (l *Lease) decodeFast(data []byte) bool {
	q := *l
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1
		case "holder":
			q.Holder, ok = r.string()
			bit = 2
		case "lease_id":
			q.LeaseID, ok = r.int64()
			bit = 4
		case "since":
			q.Since, ok = r.time()
			bit = 8
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*l = q
	return true
}

// rawIf reads any JSON value for a json.RawMessage field: its bytes (a
// copy, as encoding/json makes) only if keep, checked either way. A
// host manager reads every cast's op and skips the instance and the
// alternates a build cast carries this way, without a copy.
func (r *jsonReader) rawIf(keep bool) (json.RawMessage, bool) {
	r.i = skipWS(r.data, r.i)
	start := r.i
	if !r.skipValue(0) {
		return nil, false
	}
	if !keep {
		return nil, true
	}
	return append(json.RawMessage(nil), r.data[start:r.i]...), true
}

// rawSpan is rawIf returning, without keep, the value's bytes in the
// reader's data (not a copy; the caller must not keep them).
func (r *jsonReader) rawSpan(keep bool) (json.RawMessage, bool) {
	if keep {
		return r.rawIf(true)
	}
	r.i = skipWS(r.data, r.i)
	start := r.i
	if !r.skipValue(0) {
		return nil, false
	}
	return r.data[start:r.i:r.i], true
}

// maxSkipDepth bounds skipValue's recursion (encoding/json's own limit
// is 10,000; a record Berth writes nests a few levels).
const maxSkipDepth = 64

// skipValue reads past one JSON value of any kind, checking its grammar
// as encoding/json's scanner does (strings with their escapes, no
// control characters; numbers by JSON's grammar; literals spelled out).
// Deeper than maxSkipDepth it declines, leaving the value to
// encoding/json.
func (r *jsonReader) skipValue(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	r.i = skipWS(r.data, r.i)
	if r.i >= len(r.data) {
		return false
	}
	switch c := r.data[r.i]; {
	case c == '{':
		r.i++
		if r.next('}') {
			return true
		}
		for {
			r.i = skipWS(r.data, r.i)
			if !r.skipString() || !r.next(':') || !r.skipValue(depth+1) {
				return false
			}
			if r.next(',') {
				continue
			}
			return r.next('}')
		}
	case c == '[':
		r.i++
		if r.next(']') {
			return true
		}
		for {
			if !r.skipValue(depth + 1) {
				return false
			}
			if r.next(',') {
				continue
			}
			return r.next(']')
		}
	case c == '"':
		return r.skipString()
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	default:
		_, _, ok := r.number()
		return ok
	}
}

// skipString reads past a string at r.i (whitespace already skipped),
// escapes included: \" \\ \/ \b \f \n \r \t and \u with four hex
// digits; a byte below 0x20 is refused, as encoding/json refuses it.
func (r *jsonReader) skipString() bool {
	d, i := r.data, r.i
	if i >= len(d) || d[i] != '"' {
		return false
	}
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			r.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(d) {
				return false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d) || !isHex4(d[i+1:i+5]) {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// literal reads the literal lit (true, false or null) at r.i.
func (r *jsonReader) literal(lit string) bool {
	if len(r.data)-r.i < len(lit) || string(r.data[r.i:r.i+len(lit)]) != lit {
		return false
	}
	r.i += len(lit)
	return true
}
