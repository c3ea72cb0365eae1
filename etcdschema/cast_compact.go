package etcdschema

import (
	"fmt"
	"maps"
	"slices"
)

// A build cast carries its instance record (Build.Instance, W4 in
// docs/flows.md), and until version 2 it also wrote, on the cast itself,
// seven members the instance holds with the same values: instance_uuid,
// name, cell, flavor, project_id, user_id and request_id, ~290 of a
// cast's ~1,540 bytes. Every byte put is proposed, logged, applied and
// delivered to watchers by etcd (~10 B allocated per byte), so
// EncodeCast writes version 2 when the cast's values of those members
// are the instance's: it leaves them out, and a reader takes them from
// the carried instance (complete, after either decoder, so the value
// and the error are one). Encode writes every other cast (a delete, a
// move, a retry's next attempt through Encode, a cast whose members
// differ from its instance's) in the full form, version 1, as before.
//
// An older Berth refuses a version 2 cast by its version (Decode's
// ErrUnsupportedVersion naming the key; nothing misread): an older agent
// leaves such a build alone until it is upgraded, and an older server
// process (its leader's take-back, its API's delete, its host manager's
// count) fails on it with that error. So the upgrade order is agents and
// cell conductors first, server processes last (docs/operator-guide.md).

// castCompactVersion is the version of a cast that leaves out what its
// instance holds; castFullVersion that of every other cast.
const (
	castFullVersion    = 1
	castCompactVersion = 2
)

// setVersion stamps the full form's version: Encode writes every member
// (EncodeCast stamps version 2 itself when it leaves them out).
func (b *Build) setVersion(int) { b.Version = castFullVersion }

// castCarriesMembersOf reports whether the cast's own instance_uuid, name,
// cell, flavor, project, user and request id are inst's, so a version 2
// cast may leave them out. Equal as values (a nil and an empty map or
// list both read back nil), which is all a reader sees.
func castCarriesMembersOf(b *Build, inst *Instance) bool {
	return b.Op == OpBuild && b.Move == nil &&
		b.InstanceUUID == inst.UUID && b.Name == inst.Name && b.Cell == inst.Cell &&
		b.ProjectID == inst.ProjectID && b.UserID == inst.UserID && b.RequestID == inst.RequestID &&
		sameFlavor(&b.Flavor, &inst.Flavor)
}

func sameFlavor(a, b *Flavor) bool {
	return a.Version == b.Version && a.ID == b.ID && a.Name == b.Name && a.VCPUs == b.VCPUs &&
		a.RAMMB == b.RAMMB && a.DiskGB == b.DiskGB && a.EphemeralGB == b.EphemeralGB && a.SwapMB == b.SwapMB &&
		maps.Equal(a.ExtraSpecs, b.ExtraSpecs) &&
		(a.Description == nil) == (b.Description == nil) && (a.Description == nil || *a.Description == *b.Description) &&
		a.RXTXFactor == b.RXTXFactor && a.Private == b.Private && slices.Equal(a.Projects, b.Projects)
}

// complete takes a version 2 cast's left-out members from the instance
// it carries. A version 2 cast without an instance, or with one that
// does not decode, fails to decode.
func (b *Build) complete(key string) error {
	if b.Version < castCompactVersion {
		return nil
	}
	inst, err := castInstance(key, b.Instance)
	if err != nil {
		return err
	}
	b.InstanceUUID, b.Name, b.Cell, b.Flavor = inst.UUID, inst.Name, inst.Cell, inst.Flavor
	b.ProjectID, b.UserID, b.RequestID = inst.ProjectID, inst.UserID, inst.RequestID
	b.carried = inst
	return nil
}

// CarriedInstance decodes the instance record the cast carries (key
// names it in an error). A version 2 cast's was decoded already to
// complete the cast: that one is handed over (a second call decodes
// again), so the agent decodes a cast's instance once.
func (b *Build) CarriedInstance(key string) (*Instance, error) {
	if inst := b.carried; inst != nil {
		b.carried = nil
		return inst, nil
	}
	var inst Instance
	if err := Decode(key, b.Instance, &inst); err != nil {
		return nil, err
	}
	return &inst, nil
}

// complete checks a version 2 cast's instance as Build.complete does, so
// a cast fails as a BuildOp exactly when it fails as a Build.
func (o *BuildOp) complete(key string) error {
	raw := o.instance
	o.instance = nil // a slice of the decoded bytes (the fast path): not kept
	if o.Version < castCompactVersion {
		return nil
	}
	_, err := castInstance(key, raw)
	return err
}

func castInstance(key string, raw []byte) (*Instance, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("decode %s: a version %d cast carries no instance", key, castCompactVersion)
	}
	var inst Instance
	if err := Decode(key, raw, &inst); err != nil {
		return nil, fmt.Errorf("instance carried in the cast: %w", err)
	}
	return &inst, nil
}
