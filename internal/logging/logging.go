// Package logging builds Berth's process logger from the log block of the
// config. Every package logs through hclog with the stable keys below, so
// that one grep (or one JSON query) follows an instance, a host or a
// request across every role's logs.
package logging

import (
	"io"

	"github.com/berth-project/berth/configs"
	"github.com/hashicorp/go-hclog"
)

// Name is the root logger's name; each role derives its own with
// logger.Named(<role>), e.g. "berth.scheduler".
const Name = "berth"

// Stable log keys. Use these constants, never string literals, so that the
// same thing is spelled the same in every role's logs; renaming one breaks
// operators' queries and dashboards.
const (
	KeyInstance  = "instance"   // instance (server) uuid
	KeyHost      = "host"       // compute host name
	KeyCell      = "cell"       // cell name
	KeyRequestID = "request_id" // API request id, carried through the boot flow
	KeyRole      = "role"       // server, conductor, agent, dev
	KeyComponent = "component"  // a part of a role, e.g. "host_manager"
)

// New returns the root logger writing to w at cfg.Level, as text or JSON
// per cfg.Format. configs has already rejected unknown levels and formats;
// an empty Log (zero value) logs text at info.
func New(cfg configs.Log, w io.Writer) hclog.Logger {
	level := hclog.LevelFromString(cfg.Level)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       Name,
		Level:      level,
		Output:     w,
		JSONFormat: cfg.Format == configs.LogFormatJSON,
		// Logs go to files and journald far more than to terminals.
		Color: hclog.ColorOff,
	})
}
