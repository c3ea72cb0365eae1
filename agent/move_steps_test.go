package agent

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// A step registered twice (or over a cold move's step) is a programming
// error caught at start, not a step silently replaced.
func TestMoveStepsRefuseATwin(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering an existing step did not panic")
		}
	}()
	registerMoveStep(etcdschema.MovePrep, moveStep{status: etcdschema.MigrationPreMigrating})
}
