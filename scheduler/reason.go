package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-project/berth/placement"
)

// The reason a request found no host, worded kube-scheduler's way: how
// many hosts were looked at, how many fit, and the hosts that did not
// grouped by what stopped them, the commonest first, each group naming
// the resource and the figures an operator acts on:
//
//	0 of 8 hosts fit: 8 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 8192 MB)
//	0 of 8 hosts fit: VCPU 32 exceeds max_unit 16 on every host
//	0 of 3 hosts fit: 2 lacked VCPU (...); compute-3 is disabled: maintenance
//
// The verdicts come from explain.go, which gathers them only once a
// request has failed; this file only words them, so it is a pure
// function a table tests.

// verdictKind is what stopped one host.
type verdictKind uint8

const (
	// verdictMiss: a condition of the placement query (Miss says which),
	// or a lack of room left by this request's own earlier picks.
	verdictMiss verdictKind = iota
	// verdictDisabled: the compute service is disabled (its provider
	// carries COMPUTE_STATUS_DISABLED); Reason is the service's.
	verdictDisabled
	// verdictFilter: a filter (By) turned it down for Reason.
	verdictFilter
	// verdictClaimLost: it had room in this scheduler's view, but the
	// claim was refused: another request took the room meanwhile.
	verdictClaimLost
	// verdictUnoffered: it fits, but placement's answer stopped before it
	// (max_placement_results).
	verdictUnoffered
	// verdictUnweighed: it passed the filters with room, but the pick
	// weighed only max_hosts_to_weigh of those that did.
	verdictUnweighed
	// verdictExcluded: the request itself left it out (By: ignore_hosts or
	// requested_destination; Reason says how).
	verdictExcluded
	// verdictNoService: a provider with no compute service this
	// scheduler knows of.
	verdictNoService
	// verdictFits: nothing stopped it.
	verdictFits
)

// hostVerdict is why one host could not take the instance being placed.
type hostVerdict struct {
	Host       string
	Kind       verdictKind
	Miss       placement.Miss
	By, Reason string
}

// failure is what the reason is made of: the verdicts of every host
// looked at, and for a request of several instances how many were placed
// before one could not be.
type failure struct {
	Verdicts          []hostVerdict
	Placed, Instances int
}

// maxNamed is how many hosts a group names before it counts the rest.
const maxNamed = 3

// String is the reason, without Nova's "No valid host was found. " head.
func (f failure) String() string {
	var b strings.Builder
	if f.Instances > 1 && f.Placed > 0 {
		fmt.Fprintf(&b, "Placed %d of %d instances, then ", f.Placed, f.Instances)
	}
	if len(f.Verdicts) == 0 {
		b.WriteString("no host is known to placement")
		return capitalize(b.String()) + "."
	}
	fit := 0
	for _, v := range f.Verdicts {
		if v.Kind == verdictFits {
			fit++
		}
	}
	noun := "hosts"
	if len(f.Verdicts) == 1 {
		noun = "host"
	}
	fmt.Fprintf(&b, "%d of %d %s fit", fit, len(f.Verdicts), noun)
	groups := groupVerdicts(f.Verdicts)
	for i, g := range groups {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(g.phrase(len(f.Verdicts)))
	}
	return capitalize(b.String()) + "."
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// verdictGroup is the hosts stopped by one thing.
type verdictGroup struct {
	kind  verdictKind
	miss  placement.Miss // kind, class and amount; Free and Limit the extremes
	by    string
	hosts []hostVerdict
	// limits says the hosts' unit limits differ.
	limitsDiffer bool
}

// groupKey says which hosts are stopped by the same thing: one resource
// condition per class, one filter, one of each other kind.
func groupKey(v hostVerdict) string {
	switch v.Kind {
	case verdictMiss:
		return fmt.Sprintf("m%d/%s/%d", v.Miss.Kind, v.Miss.Class, v.Miss.Amount)
	case verdictFilter:
		return "f/" + v.By
	}
	return fmt.Sprintf("k%d", v.Kind)
}

// groupVerdicts groups the verdicts of hosts that did not fit, the
// largest group first (then in the order of the kinds, then by key).
func groupVerdicts(vs []hostVerdict) []*verdictGroup {
	byKey := map[string]*verdictGroup{}
	var keys []string
	for _, v := range vs {
		if v.Kind == verdictFits {
			continue
		}
		k := groupKey(v)
		g := byKey[k]
		if g == nil {
			g = &verdictGroup{kind: v.Kind, miss: v.Miss, by: v.By}
			byKey[k] = g
			keys = append(keys, k)
		} else if v.Kind == verdictMiss {
			switch v.Miss.Kind {
			case placement.MissCapacity:
				g.miss.Free = max(g.miss.Free, v.Miss.Free)
			case placement.MissMaxUnit, placement.MissStepSize:
				g.limitsDiffer = g.limitsDiffer || v.Miss.Limit != g.miss.Limit
				g.miss.Limit = max(g.miss.Limit, v.Miss.Limit)
			case placement.MissMinUnit:
				g.limitsDiffer = g.limitsDiffer || v.Miss.Limit != g.miss.Limit
				g.miss.Limit = min(g.miss.Limit, v.Miss.Limit)
			}
		}
		g.hosts = append(g.hosts, v)
	}
	out := make([]*verdictGroup, 0, len(keys))
	for _, k := range keys {
		g := byKey[k]
		sort.SliceStable(g.hosts, func(i, j int) bool { return g.hosts[i].Host < g.hosts[j].Host })
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if len(a.hosts) != len(b.hosts) {
			return len(a.hosts) > len(b.hosts)
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.miss.Kind != b.miss.Kind {
			return a.miss.Kind < b.miss.Kind
		}
		return groupKey(a.hosts[0]) < groupKey(b.hosts[0])
	})
	return out
}

// unit is how an amount of a standard class is read.
func amount(rc string, n int64) string {
	switch rc {
	case placement.MemoryMB:
		return fmt.Sprintf("%d MB", n)
	case placement.DiskGB:
		return fmt.Sprintf("%d GB", n)
	}
	return fmt.Sprintf("%d", n)
}

// phrase words one group; total is how many hosts were looked at.
func (g *verdictGroup) phrase(total int) string {
	n := len(g.hosts)
	one := n == 1
	first := g.hosts[0].Host
	every := n == total && total > 1
	// who is the subject: the host's name alone, "every host" or a count.
	who := func(plural string) string {
		switch {
		case one:
			return first
		case every:
			return "every host"
		}
		return fmt.Sprintf("%d %s", n, plural)
	}
	m := g.miss
	switch g.kind {
	case verdictDisabled:
		return g.disabledPhrase()
	case verdictFilter:
		return fmt.Sprintf("%s removed %d (%s)", g.by, n, g.sampleReasons())
	case verdictClaimLost:
		if one {
			return first + " was taken by another request meanwhile"
		}
		return fmt.Sprintf("%d were taken by other requests meanwhile", n)
	case verdictUnoffered:
		if one {
			return first + " had room but was not among placement's answers (max_placement_results)"
		}
		return fmt.Sprintf("%d had room but were not among placement's answers (max_placement_results)", n)
	case verdictUnweighed:
		if one {
			return first + " had room but was not weighed (max_hosts_to_weigh)"
		}
		return fmt.Sprintf("%d had room but were not weighed (max_hosts_to_weigh)", n)
	case verdictExcluded:
		if one {
			return fmt.Sprintf("%s is left out by %s (%s)", first, g.by, g.hosts[0].Reason)
		}
		return fmt.Sprintf("%d are left out by %s", n, g.by)
	case verdictNoService:
		if one {
			return first + " has no compute service"
		}
		return fmt.Sprintf("%d have no compute service", n)
	}
	switch m.Kind {
	case placement.MissCapacity:
		if one {
			return fmt.Sprintf("%s lacked %s (needs %s, %s free)", first, m.Class, amount(m.Class, m.Amount), amount(m.Class, m.Free))
		}
		return fmt.Sprintf("%d lacked %s (needs %s, the most free on a host is %s)", n, m.Class, amount(m.Class, m.Amount), amount(m.Class, m.Free))
	case placement.MissMaxUnit, placement.MissMinUnit, placement.MissStepSize:
		verb, limit, extreme := "exceeds", "max_unit", "largest"
		switch m.Kind {
		case placement.MissMinUnit:
			verb, limit, extreme = "is under", "min_unit", "smallest"
		case placement.MissStepSize:
			verb, limit = "is not a multiple of", "step_size"
		}
		if g.limitsDiffer && m.Kind != placement.MissStepSize {
			return fmt.Sprintf("%s %d %s %s on %s (the %s is %d)", m.Class, m.Amount, verb, limit, who("hosts"), extreme, m.Limit)
		}
		if g.limitsDiffer {
			return fmt.Sprintf("%s %d %s %s on %s", m.Class, m.Amount, verb, limit, who("hosts"))
		}
		return fmt.Sprintf("%s %d %s %s %d on %s", m.Class, m.Amount, verb, limit, m.Limit, who("hosts"))
	case placement.MissNoInventory:
		if every || one && total == 1 {
			return "no host has " + m.Class
		}
		if one {
			return first + " has no " + m.Class
		}
		return fmt.Sprintf("%d have no %s", n, m.Class)
	case placement.MissRequiredTrait, placement.MissRootRequiredTrait:
		if every || one && total == 1 {
			return "no host has trait " + m.Class
		}
		if one {
			return first + " lacks trait " + m.Class
		}
		return fmt.Sprintf("%d lack trait %s", n, m.Class)
	case placement.MissForbiddenTrait, placement.MissRootForbiddenTrait:
		if one {
			return first + " has forbidden trait " + m.Class
		}
		return fmt.Sprintf("%d have forbidden trait %s", n, m.Class)
	case placement.MissMemberOf:
		if one {
			return fmt.Sprintf("%s is in none of the aggregates %s", first, m.Class)
		}
		return fmt.Sprintf("%d are in none of the aggregates %s", n, m.Class)
	case placement.MissForbiddenAggregate:
		if one {
			return fmt.Sprintf("%s is in a forbidden aggregate (%s)", first, m.Class)
		}
		return fmt.Sprintf("%d are in a forbidden aggregate (%s)", n, m.Class)
	case placement.MissInTree:
		return fmt.Sprintf("%s not in the requested tree", who("hosts are"))
	case placement.MissCombination:
		if one {
			return first + " has room for each part but no combination of its providers fits"
		}
		return fmt.Sprintf("%d have room for each part but no combination of their providers fits", n)
	}
	return fmt.Sprintf("%s did not fit", who("hosts"))
}

// disabledPhrase names disabled hosts with their reasons: each of a few,
// or a count and the first few.
func (g *verdictGroup) disabledPhrase() string {
	one := func(v hostVerdict) string {
		if v.Reason == "" {
			return v.Host + " is disabled"
		}
		return v.Host + " is disabled: " + v.Reason
	}
	if len(g.hosts) <= maxNamed {
		parts := make([]string, len(g.hosts))
		for i, v := range g.hosts {
			parts[i] = one(v)
		}
		return strings.Join(parts, "; ")
	}
	parts := make([]string, 0, maxNamed)
	for _, v := range g.hosts[:maxNamed] {
		if v.Reason == "" {
			parts = append(parts, v.Host)
		} else {
			parts = append(parts, v.Host+": "+v.Reason)
		}
	}
	return fmt.Sprintf("%d are disabled (%s, ...)", len(g.hosts), strings.Join(parts, ", "))
}

// sampleReasons is a filter's reasons for its first few hosts.
func (g *verdictGroup) sampleReasons() string {
	k := min(len(g.hosts), maxNamed)
	parts := make([]string, 0, k+1)
	for _, v := range g.hosts[:k] {
		parts = append(parts, v.Host+": "+v.Reason)
	}
	if len(g.hosts) > k {
		parts = append(parts, "...")
	}
	return strings.Join(parts, "; ")
}
