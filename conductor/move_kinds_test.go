package conductor

import (
	"context"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/workqueue"
)

// A kind registered twice is a programming error caught at start, not a
// handler silently replaced.
func TestMoveKindsRefuseATwin(t *testing.T) {
	h := func(*Superconductor, context.Context, workqueue.Item, *etcdschema.MoveRequest) error { return nil }
	r := func(*CellConductor, context.Context, workqueue.Item, *etcdschema.Retry) error { return nil }
	for name, register := range map[string]func(){
		"move kind":  func() { registerMoveKind("test-kind", h) },
		"move retry": func() { registerMoveRetry("test-kind", r) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { delete(moveKinds, "test-kind"); delete(moveRetryKinds, "test-kind") })
			register()
			defer func() {
				if recover() == nil {
					t.Fatal("a second registration of the same kind did not panic")
				}
			}()
			register()
		})
	}
}
