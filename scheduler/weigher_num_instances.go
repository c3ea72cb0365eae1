package scheduler

// NumInstancesWeigher prefers hosts with more instances when its
// multiplier is positive (packing) and fewer when negative (spreading);
// Nova ships it at 0.0, off.
type NumInstancesWeigher struct{}

var _ Weigher = NumInstancesWeigher{}

func init() { registerWeigher("num_instances", func() Weigher { return NumInstancesWeigher{} }) }

func (NumInstancesWeigher) Name() string { return "NumInstancesWeigher" }

func (NumInstancesWeigher) Weigh(h *HostState, _ *Cycle) float64 {
	return float64(h.NumInstances)
}
