package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// LogLevels are the levels Config.LogLevel accepts, most verbose first.
// etcd's own "panic" and "fatal" are left out: below error nothing worth
// an operator's attention would be left.
var LogLevels = []string{"debug", "info", "warn", "error"}

// DefaultLogLevel is etcd's level when Config.LogLevel is empty: at info
// etcd prints some fifty lines at start-up and more at every compaction;
// at warn a healthy member is silent and a struggling one (slow fdatasync,
// late heartbeats, lost peers, quota exceeded) is heard.
const DefaultLogLevel = "warn"

// loggerField names, as one key/value pair, the zap logger name an etcd
// record came from (etcd names a few of its loggers, e.g. for raft), so
// that it neither becomes part of the hclog logger's name nor is lost.
const loggerField = "zap_logger"

// advisories are etcd warnings every Berth member prints at start-up about
// choices Berth makes on purpose; they are logged at info so that a
// healthy member is silent at warn and a real warning stands out.
var advisories = map[string]bool{
	// One client port for gRPC and HTTP: Berth's roles speak gRPC and
	// etcdctl/metrics share the port, as in etcd's own default.
	"Running http and grpc server on single port. This is not recommended for production.": true,
	// Embedded etcd has no auth (configs refuses username with
	// embedded), so no simple token is ever issued.
	"simple token is not cryptographically signed": true,
}

// closingNotices are etcd warnings that, once Berth closes the member,
// only say that it is closing: a member of a cluster closes its streams
// to each peer with this warning.
var closingNotices = map[string]bool{
	"closed TCP streaming connection with remote peer": true,
}

// newZapLogger is the logger etcd gets: its records at level and above
// go to log as hclog lines. A nil log discards everything, which is what
// tests that do not care about etcd's chatter want. closing is set when
// Berth stops the member (see hclogCore.closing).
func newZapLogger(log hclog.Logger, level string, closing *atomic.Bool) (*zap.Logger, error) {
	lvl, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	if log == nil {
		return zap.NewNop(), nil
	}
	if closing == nil {
		closing = new(atomic.Bool)
	}
	// No zap.AddCaller: etcd's file:line is noise in an operator's log.
	return zap.New(&hclogCore{log: log, level: lvl, closing: closing, limit: newRateLimiter()}), nil
}

func parseLogLevel(level string) (zapcore.Level, error) {
	switch level {
	case "":
		return zapcore.WarnLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("log_level %q is not one of debug, info, warn, error", level)
}

// hclogCore is a zapcore.Core writing each entry as one hclog line: the
// entry's message as the message and its fields as key/value pairs.
type hclogCore struct {
	log   hclog.Logger
	level zapcore.Level
	// closing is set once Berth has asked the member to stop: etcd then
	// reports each of its listeners closing as an error ("setting up
	// serving from embedded etcd failed.: error=\"mux: server closed\"",
	// six lines at every shutdown), which is logged at info instead.
	closing *atomic.Bool
	// limit drops the floods of slow-request warnings (zapratelimit.go);
	// shared by the cores With makes.
	limit *rateLimiter
	// with holds the key/value pairs of the fields added by With (etcd
	// adds e.g. its member id once), rendered once rather than per line.
	with []any
}

// hclogLevel maps zap's levels onto hclog's; hclog has nothing above
// error, and zap itself exits or panics after writing a fatal or panic
// entry whatever the core does.
func hclogLevel(l zapcore.Level) hclog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return hclog.Debug
	case l == zapcore.InfoLevel:
		return hclog.Info
	case l == zapcore.WarnLevel:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

// Enabled is true when both etcd's level and the hclog logger's let the
// entry through, so that etcd does not even build a record Berth's log
// level would drop.
func (c *hclogCore) Enabled(l zapcore.Level) bool {
	if l < c.level {
		return false
	}
	switch hclogLevel(l) {
	case hclog.Debug:
		return c.log.IsDebug()
	case hclog.Info:
		return c.log.IsInfo()
	case hclog.Warn:
		return c.log.IsWarn()
	default:
		return c.log.IsError()
	}
}

func (c *hclogCore) With(fields []zapcore.Field) zapcore.Core {
	kv := make([]any, 0, len(c.with)+2*len(fields))
	kv = append(kv, c.with...)
	kv = appendFields(kv, fields)
	return &hclogCore{log: c.log, level: c.level, closing: c.closing, limit: c.limit, with: kv}
}

// Check lets an entry through when Enabled does and its family is under
// the rate limit; a dropped entry is neither encoded nor written.
func (c *hclogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Enabled(e.Level) {
		return ce
	}
	ok, suppressed := c.limit.allow(e.Level, e.Message)
	if !ok {
		return ce
	}
	if suppressed > 0 {
		// The count rides on this entry's own core, so that it is
		// written with the entry.
		return ce.AddCore(e, &hclogCore{log: c.log, level: c.level, closing: c.closing, limit: c.limit,
			with: append(append([]any(nil), c.with...), "suppressed", suppressed)})
	}
	return ce.AddCore(e, c)
}

func (c *hclogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if e.Level > zapcore.InfoLevel && c.expected(e, fields) {
		e.Level = zapcore.InfoLevel
		if !c.Enabled(e.Level) {
			return nil
		}
	}
	kv := make([]any, 0, len(c.with)+2*len(fields)+2)
	kv = append(kv, c.with...)
	kv = appendFields(kv, fields)
	if e.LoggerName != "" {
		kv = append(kv, loggerField, e.LoggerName)
	}
	c.log.Log(hclogLevel(e.Level), e.Message, kv...)
	return nil
}

// expected says whether a warning or error is one Berth expects: an
// advisory about Berth's own choices, or, while the member is closing, a
// listener or stream reporting that it was closed.
func (c *hclogCore) expected(e zapcore.Entry, fields []zapcore.Field) bool {
	if advisories[e.Message] {
		return true
	}
	if !c.closing.Load() {
		return false
	}
	if closingNotices[e.Message] {
		return true
	}
	closed := false
	for _, f := range fields {
		if f.Type != zapcore.ErrorType {
			continue
		}
		err, _ := f.Interface.(error)
		if !closedByUs(err) {
			return false
		}
		closed = true
	}
	return closed
}

// closedByUs is the error a listener, server or peer stream of etcd's
// returns once closed (a stream's context is cancelled). cmux's
// ErrServerClosed and ErrListenerClosed are matched by their text: cmux
// is etcd's dependency, not Berth's.
func closedByUs(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) ||
		errors.Is(err, context.Canceled) {
		return true
	}
	switch err.Error() {
	case "mux: server closed", "mux: listener closed":
		return true
	}
	return false
}

// Sync has nothing to flush: hclog writes each line as it comes.
func (c *hclogCore) Sync() error { return nil }

// appendFields renders fields with zap's own MapObjectEncoder (durations
// as "1.5s", errors become their text, arrays and objects become
// slices and maps) and appends them to kv in the order etcd gave them.
// A zap.Namespace field nests the fields after it under its key, as
// MapObjectEncoder does.
func appendFields(kv []any, fields []zapcore.Field) []any {
	if len(fields) == 0 {
		return kv
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if seen[f.Key] {
			continue
		}
		v, ok := enc.Fields[f.Key]
		if !ok {
			continue // inside a namespace, or a Skip field
		}
		seen[f.Key] = true
		if d, ok := v.(time.Duration); ok {
			// As etcd's own encoder writes them: "1.5s", not hclog
			// JSON's nanoseconds.
			v = d.String()
		}
		kv = append(kv, f.Key, v)
	}
	return kv
}
