package embedetcd

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
)

// etcd warns of every request slower than a threshold ("apply request
// took too long" past 100ms, "request stats" past 300ms, "trace[N] range"
// with the request's steps), each line carrying the request's content.
// On a member that is healthy but busy, or on a loaded machine, every
// request crosses the threshold: the 10,000-host boot on the shared
// 2-core machine wrote 142,000 such lines (about 1 per etcd request), and
// encoding and writing them took ~2% of the process's CPU, in the etcd
// server's goroutines, for lines no one reads past the first few. So each
// family of etcd warnings is let through at most perSecond times a
// second; the next one let through says how many were dropped before it
// (suppressed=N). Errors and the rarer warnings (leader changes, slow
// fdatasync, lost peers) are never dropped: their families rarely reach
// the limit.
const perSecond = 5

// rateLimiter counts each message family's records in the current
// second.
type rateLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	second  int64
	counts  map[string]int
	dropped map[string]int
}

func newRateLimiter() *rateLimiter {
	return &rateLimiter{now: time.Now, counts: map[string]int{}, dropped: map[string]int{}}
}

// family is a warning's message without what varies per line: etcd's
// traces are "trace[<id>] <operation>".
func family(msg string) string {
	if strings.HasPrefix(msg, "trace[") {
		if i := strings.IndexByte(msg, ']'); i > 0 {
			return "trace[]" + msg[i+1:]
		}
	}
	return msg
}

// allow says whether a record of level l and message msg is written, and
// how many of its family were dropped since the last one written.
func (r *rateLimiter) allow(l zapcore.Level, msg string) (ok bool, suppressed int) {
	if l != zapcore.WarnLevel {
		return true, 0
	}
	f := family(msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.now().Unix(); s != r.second {
		r.second = s
		clear(r.counts)
	}
	if r.counts[f] >= perSecond {
		r.dropped[f]++
		return false, 0
	}
	r.counts[f]++
	suppressed = r.dropped[f]
	delete(r.dropped, f)
	return true, suppressed
}
