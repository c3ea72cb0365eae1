// Package testhook lets end-to-end tests stop a real berth process at a
// named point, so that killing it there is deterministic rather than a
// matter of timing. It is off unless the environment asks for it:
//
//	BERTH_TEST_PAUSE_AT=<point>     the point to stop at
//	BERTH_TEST_PAUSE_FILE=<path>    a line "<point> <id>" is appended here on arrival
//
// A process that reaches the point writes the line and blocks until its
// context ends; the test waits for the line and then kills the process.
// Points: "superconductor.before-handoff" (a BuildRequest claimed, its
// hand-off transaction not yet sent), "superconductor.before-live-handoff"
// (a live migration's first destination claimed, its pre-check not yet
// cast), "superconductor.before-live-retry-handoff" (the same for a
// destination after a failed pre-check), "cellconductor.before-commit"
// (a retry leased and an alternate claimed, the cast not yet committed),
// "cellconductor.before-move-commit" (the same for a move's retry) and
// "agent.before-move-<step>" (a cold move's step cast to this agent,
// checked current, its driver call not yet made).
package testhook

import (
	"context"
	"fmt"
	"os"
)

// Env names the variables read by Pause.
const (
	EnvPoint = "BERTH_TEST_PAUSE_AT"
	EnvFile  = "BERTH_TEST_PAUSE_FILE"
)

// Pause blocks at point when the environment names it; otherwise, which
// is always the case outside tests, it returns at once.
func Pause(ctx context.Context, point, id string) {
	if os.Getenv(EnvPoint) != point {
		return
	}
	if path := os.Getenv(EnvFile); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s\n", point, id)
			f.Close()
		}
	}
	<-ctx.Done()
}
