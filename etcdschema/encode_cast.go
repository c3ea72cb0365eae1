package etcdschema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EncodeCast encodes the build cast b carrying inst and alts (as its
// Instance and Alternates), and returns with it inst's own encoding, the
// cell's instance record the same hand-off puts: a slice of the cast, so
// both values are one allocation, which the hand-off's puts take as they
// are (rawtxn.PutBytes; neither may be changed).
//
// A hand-off used to encode the instance and the alternates each to a
// string, copy both into json.RawMessages, and then check and copy them
// again into the cast (appendRawJSON): three copies and a scan of bytes
// this package had just written. Here each record is written once,
// straight into the cast. The bytes are those of the old path exactly
// (TestEncodeCastMatchesCarriedRecords): an encoding from Encode is
// compact and HTML-escaped already, which is all json.Marshal does to a
// RawMessage. b's own Instance and Alternates must be empty; it is
// stamped with its version as Encode stamps it, and so are inst and alts.
func EncodeCast(b *Build, inst *Instance, alts *Alternates) (cast, instance []byte, err error) {
	if len(b.Instance) > 0 || len(b.Alternates) > 0 {
		return nil, nil, fmt.Errorf("encode cast of %s: it carries records already", b.InstanceUUID)
	}
	for _, v := range []Versioned{b, inst, alts} {
		v.setVersion(v.SchemaVersion())
	}
	// Version 2 leaves out the members the instance holds
	// (cast_compact.go).
	compact := castCarriesMembersOf(b, inst)
	if compact {
		b.Version = castCompactVersion
	}
	bp := encodeBufs.Get().(*[]byte)
	out, ok := b.appendHead((*bp)[:0], compact)
	if !ok {
		// A cast the fast encoder leaves to json.Marshal (a move step, an
		// unusual flavor or time): the records as RawMessages, as before,
		// in the full form.
		encodeBufs.Put(bp)
		b.Version = castFullVersion
		return encodeCastMarshal(b, inst, alts)
	}
	out = append(out, `,"instance":`...)
	from := len(out)
	if out, err = appendEncoded(out, inst); err != nil {
		return nil, nil, err
	}
	to := len(out)
	out = append(out, `,"alternates":`...)
	if out, err = appendEncoded(out, alts); err != nil {
		return nil, nil, err
	}
	out = append(out, '}')
	cast = bytes.Clone(out)
	if cap(out) <= maxPooledEncodeBuf {
		*bp = out[:0]
		encodeBufs.Put(bp)
	}
	return cast, cast[from:to:to], nil
}

// appendEncoded appends v's encoding as Encode writes it (v's version
// already stamped): its own encoder, else json.Marshal.
func appendEncoded(out []byte, v Versioned) ([]byte, error) {
	if f, ok := v.(fastEncoder); ok {
		// A declining encoder returns nil; what it wrote past len(out)
		// is overwritten below.
		if b, ok := f.appendJSON(out); ok {
			return b, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return append(out, b...), nil
}

// encodeCastMarshal is EncodeCast the old way: each record encoded, then
// carried as a RawMessage.
func encodeCastMarshal(b *Build, inst *Instance, alts *Alternates) (cast, instance []byte, err error) {
	if instance, err = EncodeBytes(inst); err != nil {
		return nil, nil, err
	}
	a, err := EncodeBytes(alts)
	if err != nil {
		return nil, nil, err
	}
	carried := *b
	carried.Instance, carried.Alternates = json.RawMessage(instance), json.RawMessage(a)
	if cast, err = EncodeBytes(&carried); err != nil {
		return nil, nil, err
	}
	return cast, instance, nil
}
