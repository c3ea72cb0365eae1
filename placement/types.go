// Package placement is Berth's resource-provider engine: OpenStack
// Placement's records on etcd (store.go, providers.go), an in-memory
// watch-fed index that answers allocation-candidate queries (index.go,
// candidates.go; bounded by their work, candidate_budget.go, and merged
// off the index's lock when large, candidate_view.go; a scheduler's
// loads its consumers after its providers, consumers_deferred.go, and
// links them to their providers in small sets, consumer_set.go), the claim
// transactions and their group commit
// (claims.go, claim_batch.go), and reshapes (reshape.go). The REST API is
// placement/httpapi, which reaches the index only through the read API in
// read.go.
//
// This file is the in-process contract used by the scheduler, conductors and
// agents. Field names follow the Placement API so the HTTP layer can reuse
// them.
package placement

import (
	"errors"
	"sync/atomic"
)

// Standard resource classes the scheduler and agents talk about most.
const (
	VCPU     = "VCPU"
	MemoryMB = "MEMORY_MB"
	DiskGB   = "DISK_GB"
)

// TraitComputeStatusDisabled is set on a disabled host's root provider
// (seed pre-filter-disabled-computes).
const TraitComputeStatusDisabled = "COMPUTE_STATUS_DISABLED"

// RequestGroup is one (optionally suffixed) request group of an
// allocation-candidates query.
type RequestGroup struct {
	// Suffix is "" for the unsuffixed group, else the granular suffix.
	Suffix string
	// Resources maps resource class to the amount asked for.
	Resources map[string]int64
	// Required traits: every one must be present.
	Required []string
	// RequiredAny is the 1.39 "in:" form: each inner list needs one of its traits.
	RequiredAny [][]string
	// Forbidden traits: none may be present.
	Forbidden []string
	// MemberOf: each inner list is an any-of set of aggregates; all lists must match.
	MemberOf [][]string
	// ForbiddenAggregates: the provider may be in none of these.
	ForbiddenAggregates []string
	// InTree limits the search to the tree holding this provider.
	InTree string
}

// CandidateQuery is a whole GET /allocation_candidates request.
type CandidateQuery struct {
	Groups      []RequestGroup
	GroupPolicy string // "", "none" or "isolate"
	// Limit caps the allocation requests returned; 0 means no limit.
	Limit         int
	RootRequired  []string
	RootForbidden []string
	SameSubtree   [][]string
	// NotNestedAware asks for the answer of microversions before 1.29:
	// no allocation request uses two providers of one tree.
	NotNestedAware bool
	// RandomStart starts the walk over providers at a random one and
	// wraps around, so a Limit smaller than the providers that fit
	// samples a different window each time (like Placement's
	// randomize_allocation_candidates, which shuffles before limiting,
	// but without building every candidate first). For in-process callers
	// (the scheduler's placement_sample_size); the HTTP API never sets it.
	RandomStart bool
	// OmitMappings leaves AllocationRequest.Mappings nil: for in-process
	// callers that only claim what Allocations says (the scheduler), one
	// map less per allocation request. The HTTP API never sets it.
	OmitMappings bool
}

// ProviderAllocation is the resources one consumer holds on one provider.
type ProviderAllocation struct {
	Resources map[string]int64 `json:"resources"`
	// Order is Resources' classes in the order the client wrote them
	// (nil: none given). A write keeps it, and GET /allocations/{consumer}
	// answers in it, as Placement answers in the order of its rows.
	Order []string `json:"-"`
}

// AllocationRequest is one way to satisfy a query.
type AllocationRequest struct {
	Allocations map[string]ProviderAllocation `json:"allocations"`
	Mappings    map[string][]string           `json:"mappings,omitempty"`
}

// ResourceSummary is a provider's capacity and usage of one class.
type ResourceSummary struct {
	Capacity int64 `json:"capacity"`
	Used     int64 `json:"used"`
}

// ProviderSummary describes a provider named in the candidates.
type ProviderSummary struct {
	Resources map[string]ResourceSummary `json:"resources"`
	// std is Resources' VCPU, MEMORY_MB and DISK_GB (Standard), set
	// with Resources by the index (hasStd); not in a summary built by
	// hand. Beside Resources: a scheduler's join reads both, and one
	// cache line of each candidate's summary is what it can afford.
	std    [3]ResourceSummary
	hasStd bool

	Traits             []string `json:"traits,omitempty"`
	ParentProviderUUID string   `json:"parent_provider_uuid,omitempty"`
	RootProviderUUID   string   `json:"root_provider_uuid,omitempty"`
	// memo keeps encodings of this summary (Memo), shared by every copy
	// of it; nil in a summary built by hand.
	memo *summaryMemo
}

// Standard returns the summary's VCPU, MEMORY_MB and DISK_GB, in that
// order (zero for a class it lacks), and true, when the index rendered
// it; false for a summary built by hand (read Resources). Every
// scheduling request weighs up to 1,000 candidates on these three, and
// a map lookup per class per candidate was a cache miss or two each:
// these sit beside the Resources pointer a caller reads anyway.
func (ps *ProviderSummary) Standard() ([3]ResourceSummary, bool) {
	return ps.std, ps.hasStd
}

// SummaryMemoSlots is how many encodings of one summary Memo keeps.
const SummaryMemoSlots = 2

type summaryMemo struct {
	slots [SummaryMemoSlots]atomic.Pointer[[]byte]
}

// Memo returns build's bytes for this summary in slot (one per shape of
// encoding), built once per provider record: the index renders a summary
// once per record and every answer naming the provider shares it, so the
// HTTP API writes a provider's summary once, not once per request. A
// summary the index did not render has no memo and builds every time.
// build must depend only on the summary and the slot; the bytes are
// shared, read-only.
func (ps *ProviderSummary) Memo(slot int, build func() []byte) []byte {
	if ps.memo == nil {
		return build()
	}
	if b := ps.memo.slots[slot].Load(); b != nil {
		return *b
	}
	b := build()
	ps.memo.slots[slot].Store(&b)
	return b
}

// Candidates is the answer to a CandidateQuery.
type Candidates struct {
	AllocationRequests []AllocationRequest
	ProviderSummaries  map[string]ProviderSummary
	// roots[i] is the root provider of AllocationRequests[i]'s tree, when
	// the answer came from the index (RootOf).
	roots []string
	// summaryOrder places each of ProviderSummaries (SummaryOrder).
	summaryOrder []summaryPlace
}

// RootOf returns the root provider uuid of the tree allocation request i
// draws from, and false when the answer does not say (one built by hand).
func (c *Candidates) RootOf(i int) (string, bool) {
	if i < len(c.roots) && c.roots[i] != "" {
		return c.roots[i], true
	}
	return "", false
}

// AllocationWrite replaces one consumer's allocations (PUT /allocations/{c}).
// An empty Allocations map removes them.
type AllocationWrite struct {
	Allocations  map[string]ProviderAllocation
	ProjectID    string
	UserID       string
	ConsumerType string
	// ConsumerGeneration nil means the consumer must not exist yet.
	ConsumerGeneration *int64
	// Order is Allocations' providers in the order the client wrote them
	// (nil: none given; see ProviderAllocation.Order).
	Order []string
}

// Errors returned by the in-process API; the HTTP layer maps them to status
// codes and Placement error codes.
var (
	// ErrConcurrentUpdate: a provider or consumer changed under the write
	// (409 placement.concurrent_update).
	ErrConcurrentUpdate = errors.New("placement: concurrent update")
	// ErrConsumerGenerationConflict: the caller's consumer generation is stale
	// (409 placement.concurrent_update, "consumer generation conflict").
	ErrConsumerGenerationConflict = errors.New("placement: consumer generation conflict")
	// ErrInsufficientCapacity: the amounts do not fit, or break min/max/step
	// (409 placement.undefined_code).
	ErrInsufficientCapacity = errors.New("placement: insufficient capacity")
	// ErrProviderNotFound: an allocation names a provider that does not exist.
	ErrProviderNotFound = errors.New("placement: resource provider not found")
	// ErrNotFound: the thing asked for does not exist.
	ErrNotFound = errors.New("placement: not found")
)
