package placement

import (
	"slices"
	"sort"
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
	places := sortPlaces(slices.Clone(c.summaryOrder)) // answers may be shared: sort a copy
	out := make([]string, len(places))
	for i, p := range places {
		out[i] = p.uuid
	}
	return out
}

// sortPlaces sorts places into Placement's order and names a provider
// summarised twice (reached from two places, which sort next to each
// other) once.
func sortPlaces(places []summaryPlace) []summaryPlace {
	slices.SortFunc(places, func(a, b summaryPlace) int {
		if c := compareRev(a.rootRev, b.rootRev); c != 0 {
			return c
		}
		if c := compareRev(a.rev, b.rev); c != 0 {
			return c
		}
		if a.uuid < b.uuid {
			return -1
		}
		if a.uuid > b.uuid {
			return 1
		}
		return 0
	})
	return slices.CompactFunc(places, func(a, b summaryPlace) bool { return a.uuid == b.uuid })
}

// compareRev orders creation revisions, an unknown one (0) after all
// known ones.
func compareRev(a, b int64) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	case a < b:
		return -1
	}
	return 1
}
