package scheduler

import (
	"io"
	"log"

	"github.com/hashicorp/go-hclog"
)

// requestLog is the scheduler's logger with the request's id, as
// log.With("request_id", id) gives it, but made only when something is
// logged: With copies the logger and boxes its arguments, three
// allocations with a plain hclog logger and about eight per request (of
// about ninety) in the 10k boot's heap profile, for lines a request at
// the default level never writes. The level questions go to the scheduler's
// logger, whose level a With'd logger shares, so a line below the
// level makes nothing either.
type requestLog struct {
	hclog.Logger
	id string
}

func (l *requestLog) with() hclog.Logger { return l.Logger.With("request_id", l.id) }

func (l *requestLog) Log(level hclog.Level, msg string, args ...any) {
	l.with().Log(level, msg, args...)
}
func (l *requestLog) Trace(msg string, args ...any) {
	if l.IsTrace() {
		l.with().Trace(msg, args...)
	}
}
func (l *requestLog) Debug(msg string, args ...any) {
	if l.IsDebug() {
		l.with().Debug(msg, args...)
	}
}
func (l *requestLog) Info(msg string, args ...any) {
	if l.IsInfo() {
		l.with().Info(msg, args...)
	}
}
func (l *requestLog) Warn(msg string, args ...any) {
	if l.IsWarn() {
		l.with().Warn(msg, args...)
	}
}
func (l *requestLog) Error(msg string, args ...any)  { l.with().Error(msg, args...) }
func (l *requestLog) ImpliedArgs() []any             { return l.with().ImpliedArgs() }
func (l *requestLog) With(args ...any) hclog.Logger  { return l.with().With(args...) }
func (l *requestLog) Named(name string) hclog.Logger { return l.with().Named(name) }
func (l *requestLog) ResetNamed(name string) hclog.Logger {
	return l.with().ResetNamed(name)
}
func (l *requestLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return l.with().StandardLogger(opts)
}
func (l *requestLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.with().StandardWriter(opts)
}
