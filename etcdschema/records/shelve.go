package records

import (
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// ShelveCast is the cast of shelve step (etcdschema.StepShelve, ...) of
// in to the host that works it: in's flavor and image, no migration.
func ShelveCast(in *etcdschema.Instance, step, requestID string, now time.Time) *etcdschema.Build {
	return &etcdschema.Build{Op: etcdschema.OpMove, InstanceUUID: in.UUID, Name: in.Name, Cell: in.Cell,
		Flavor: in.Flavor, ProjectID: in.ProjectID, UserID: in.UserID, Attempt: in.Attempts,
		RequestID: requestID, CastAt: now, Image: in.Image,
		Move: &etcdschema.MoveStep{Step: step, Kind: etcdschema.MoveKindUnshelve}}
}
