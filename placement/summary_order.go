package placement

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
)

// summaryPlace is where one provider summary goes in Placement's order.
type summaryPlace struct {
	rootRev int64 // the revision that created its tree root's key
	rev     int64 // the revision that created its own key
	uuid    string
	sum     *ProviderSummary // the summary placed (nil in hand-built answers)
}

// SummaryOrder returns the uuids of ProviderSummaries in the order
// Placement writes them: tree by tree, trees in the order their roots
// were created, and within a tree providers in the order they were
// created (Placement 8.0 builds its summaries dict from one query over
// resource_providers by root_provider_id, which walks the root's index:
// recorded in TestCandidateSummaryOrder). A provider whose creation the
// index does not know yet (first indexed from this service's own claim)
// sorts after the known ones, as in ListProviders, then by uuid. Hand-built
// answers, which carry no places, list their summaries by uuid.
//
// Placement builds the summaries group by group, so a granular request
// whose later group alone reaches a tree lists that tree after the first
// group's; Berth keeps the plain creation order there.
func (c *Candidates) SummaryOrder() []string {
	if len(c.summaryOrder) < len(c.ProviderSummaries) {
		out := make([]string, 0, len(c.ProviderSummaries))
		for u := range c.ProviderSummaries {
			out = append(out, u)
		}
		sort.Strings(out)
		return out
	}
	places := sortPlaces(c.summaryOrder) // sorts a copy: answers may be shared
	out := make([]string, len(places))
	for i, p := range places {
		out[i] = p.uuid
	}
	return out
}

// sortPlaces sorts places into Placement's order and names a provider
// summarised twice (reached from two places, which sort next to each
// other) once. It sorts small keys (the two revisions, an unknown one
// made the largest, and the place's index) rather than the places: at
// 1,000 summaries the sort of the places themselves, with branches for
// unknown revisions and a uuid compare for every pair created in one
// transaction, was a fifth of a candidates request.
func sortPlaces(places []summaryPlace) []summaryPlace {
	var keys []placeKey
	return sortPlacesInto(places, &keys, nil)
}

// sortPlacesInto is sortPlaces with the arrays it needs given (reused
// when large enough): *keys for the sort keys (left there for the next
// call) and out for the answer.
func sortPlacesInto(places []summaryPlace, keysp *[]placeKey, out []summaryPlace) []summaryPlace {
	keys := resized(*keysp, len(places))
	*keysp = keys
	for i, p := range places {
		keys[i] = placeKey{revKey(p.rootRev), revKey(p.rev), int32(i)}
	}
	slices.SortFunc(keys, func(a, b placeKey) int {
		switch {
		case a.root != b.root:
			return cmp.Compare(a.root, b.root)
		case a.own != b.own:
			return cmp.Compare(a.own, b.own)
		}
		return strings.Compare(places[a.i].uuid, places[b.i].uuid)
	})
	out = resized(out, len(places))
	for i, k := range keys {
		out[i] = places[k.i]
	}
	return slices.CompactFunc(out, func(a, b summaryPlace) bool { return a.uuid == b.uuid })
}

// resized is s with length n, reusing its array when it is large
// enough (the elements are then stale: the caller sets every one).
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// placeKey is a summary's place as sortPlaces compares it.
type placeKey struct {
	root, own int64
	i         int32
}

// revKey orders creation revisions: an unknown one (0) after every
// known one.
func revKey(rev int64) int64 {
	if rev == 0 {
		return math.MaxInt64
	}
	return rev
}
