package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteJSON writes r as one JSON line.
func (r *PlacementResult) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// ms is d in milliseconds for the table.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// perSec is n events over d as a rate.
func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// WriteTable prints r for a human.
func (r *PlacementResult) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(f, a...)) }
	conns := "keep-alive connections"
	if !r.KeepAlive {
		conns = "a connection per request"
	}
	row("placement", "%s, %d providers, %s", r.URL, r.Providers, conns)
	row("load average", "start %s, end %s", r.LoadAvg[0], r.LoadAvg[1])
	row("populate", "%.1f s, %d requests, %.0f requests/s, %.0f providers/s",
		r.PopulateTime.Seconds(), r.PopulateReqs, perSec(r.PopulateReqs, r.PopulateTime), perSec(r.Providers, r.PopulateTime))
	for _, c := range r.Candidates {
		row(fmt.Sprintf("candidates limit %d", c.Limit), "p50 %s, p99 %s (%d requests; %d answers, %d bytes)",
			ms(c.Latency.P50), ms(c.Latency.P99), c.Latency.N, c.Answers, c.Bytes)
	}
	row("claim cycles", "%d clients: %d cycles in %.1f s = %.1f/s; PUT p50 %s p99 %s, cycle p50 %s p99 %s, %d conflicts",
		r.ClaimClients, r.ClaimCycles, r.ClaimTime.Seconds(), perSec(r.ClaimCycles, r.ClaimTime),
		ms(r.ClaimPut.P50), ms(r.ClaimPut.P99), ms(r.ClaimCycle.P50), ms(r.ClaimCycle.P99), r.ClaimConflicts)
	rc := r.Race
	row("hot-provider race", "%d clients, %d one-VCPU claims tried on %d VCPU: %d claimed, %d generation conflicts (409 concurrent_update), %d refused (409 capacity) in %.2f s; claim p50 %s p99 %s",
		rc.Clients, rc.Attempts, rc.Capacity, rc.Claimed, rc.Conflicts, rc.Refused, rc.Elapsed.Seconds(), ms(rc.ClaimLatency.P50), ms(rc.ClaimLatency.P99))
	verdict := "ok"
	if rc.OverCommit || rc.Lost > 0 {
		verdict = "FAILED"
	}
	row("race check", "%s: %d VCPU used after the race (capacity %d, %d claims answered 204, %d lost)", verdict, rc.Used, rc.Capacity, rc.Claimed, rc.Lost)
	if r.Command != "" {
		row("command", "%s", r.Command)
	}
	tw.Flush()
}
