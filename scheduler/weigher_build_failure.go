package scheduler

// BuildFailureWeigher pushes hosts with recent failed builds down: the raw
// value is the negated failed_builds count the agent reports (reset to 0 on
// a success), so with Nova's 1e6 multiplier one failure outweighs any
// resource preference.
type BuildFailureWeigher struct{}

var _ Weigher = BuildFailureWeigher{}

func init() { registerWeigher("build_failure", func() Weigher { return BuildFailureWeigher{} }) }

func (BuildFailureWeigher) Name() string { return "BuildFailureWeigher" }

func (BuildFailureWeigher) Weigh(h *HostState, _ *Cycle) float64 {
	return -float64(h.FailedBuilds)
}
