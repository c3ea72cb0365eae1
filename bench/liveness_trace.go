package bench

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Why a host's lease is lost, measured rather than guessed. A lease
// expires TTL after etcd last refreshed it (its grant's apply, or a
// renewal), and etcd refreshed it before the fleet saw the answer; so
// a lease is surely alive while the time since the host's last answer
// (grant or renewal) is under the TTL. Each beat notes how long it
// has been since that answer when it starts, how late it started after
// its slot, and how long etcd took to answer it; a beat answered "lost"
// is counted by the first of these that explains it:
//
//   - first beat: the host never renewed since its grant, and its first
//     beat started a TTL or more after the grant's answer (the grant
//     answered late, or its first slot came late);
//   - sent late: the beat started a TTL or more after the last answer
//     (the fleet's schedule or its workers held it up);
//   - answered late: it started in time and etcd answered "lost" (it
//     held the renewal past the lease's expiry, or the lease was
//     revoked for another reason).
type livenessTrace struct {
	// grant is grant request to answer (registration and re-grants);
	// renew is beat start to answer, of beats answered alive; since is
	// last answer to beat start, every beat; slot is slot to start.
	grant, renew, since, slot latencyHist
	// provider and instances are how long a provider sync and an
	// instance sync took, each holding a worker meanwhile.
	provider, instances                                    latencyHist
	lostFirst, lostSentLate, lostAnsweredLate, renewErrors atomic.Int64
}

// latencyHist counts durations in power-of-two millisecond buckets:
// bucket 0 is under 1 ms, bucket b is [2^(b-1), 2^b) ms, the last holds
// everything longer. Cheap to add to from many goroutines, and to sum
// over processes.
type latencyHist [histBuckets]atomic.Int64

const histBuckets = 22 // the last: 2^20 ms (17 min) and up

func (h *latencyHist) add(d time.Duration) {
	ms := d.Milliseconds()
	b := 0
	for ms > 0 && b < histBuckets-1 {
		ms >>= 1
		b++
	}
	h[b].Add(1)
}

// since adds the time since start.
func (h *latencyHist) since(start time.Time) { h.add(time.Since(start)) }

func (h *latencyHist) snapshot() HistCounts {
	var c HistCounts
	for i := range h {
		c[i] = h[i].Load()
	}
	return c
}

// HistCounts is a latencyHist's counts, as the fleet's status carries
// them.
type HistCounts [histBuckets]int64

// Add sums o into c.
func (c *HistCounts) Add(o HistCounts) {
	for i := range c {
		c[i] += o[i]
	}
}

// Sub is c less an earlier snapshot o.
func (c HistCounts) Sub(o HistCounts) HistCounts {
	for i := range c {
		c[i] -= o[i]
	}
	return c
}

// Quantile is the upper bound of the bucket holding quantile q (0 with
// no counts): at most twice the true value.
func (c HistCounts) Quantile(q float64) time.Duration {
	var n int64
	for _, v := range c {
		n += v
	}
	if n == 0 {
		return 0
	}
	want := int64(q*float64(n-1)) + 1
	for b, v := range c {
		if want -= v; want <= 0 {
			return bucketTop(b)
		}
	}
	return bucketTop(histBuckets - 1)
}

func bucketTop(b int) time.Duration { return time.Duration(1<<b) * time.Millisecond }

// String is p50/p99/max (bucket tops), or "-" with no counts.
func (c HistCounts) String() string {
	if c.Quantile(1) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s/%s", fmtMs(c.Quantile(0.5)), fmtMs(c.Quantile(0.99)), fmtMs(c.Quantile(1)))
}

func fmtMs(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%gs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// LivenessStats is a snapshot of the fleet's livenessTrace.
type LivenessStats struct {
	Grant, Renew, Since, Slot                           HistCounts
	ProviderSync, InstanceSync                          HistCounts
	LostFirst, LostSentLate, LostAnsweredLate, RenewErr int64
}

func (t *livenessTrace) snapshot() LivenessStats {
	return LivenessStats{Grant: t.grant.snapshot(), Renew: t.renew.snapshot(), Since: t.since.snapshot(),
		Slot: t.slot.snapshot(), ProviderSync: t.provider.snapshot(), InstanceSync: t.instances.snapshot(), LostFirst: t.lostFirst.Load(), LostSentLate: t.lostSentLate.Load(),
		LostAnsweredLate: t.lostAnsweredLate.Load(), RenewErr: t.renewErrors.Load()}
}

// Add sums o into s.
func (s *LivenessStats) Add(o LivenessStats) {
	s.Grant.Add(o.Grant)
	s.Renew.Add(o.Renew)
	s.Since.Add(o.Since)
	s.Slot.Add(o.Slot)
	s.ProviderSync.Add(o.ProviderSync)
	s.InstanceSync.Add(o.InstanceSync)
	s.LostFirst += o.LostFirst
	s.LostSentLate += o.LostSentLate
	s.LostAnsweredLate += o.LostAnsweredLate
	s.RenewErr += o.RenewErr
}

// Sub is s less an earlier snapshot o.
func (s LivenessStats) Sub(o LivenessStats) LivenessStats {
	return LivenessStats{Grant: s.Grant.Sub(o.Grant), Renew: s.Renew.Sub(o.Renew), Since: s.Since.Sub(o.Since),
		Slot: s.Slot.Sub(o.Slot), ProviderSync: s.ProviderSync.Sub(o.ProviderSync), InstanceSync: s.InstanceSync.Sub(o.InstanceSync), LostFirst: s.LostFirst - o.LostFirst, LostSentLate: s.LostSentLate - o.LostSentLate,
		LostAnsweredLate: s.LostAnsweredLate - o.LostAnsweredLate, RenewErr: s.RenewErr - o.RenewErr}
}

// String is one line for a progress report or the result table.
func (s LivenessStats) String() string {
	return fmt.Sprintf("grant %s, beat answered %s, since last answer %s, beat after slot %s, provider sync %s, instance sync %s (p50/p99/max); lost: %d first beat, %d sent late, %d answered late; %d beats unanswered",
		s.Grant, s.Renew, s.Since, s.Slot, s.ProviderSync, s.InstanceSync, s.LostFirst, s.LostSentLate, s.LostAnsweredLate, s.RenewErr)
}
