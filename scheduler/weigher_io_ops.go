package scheduler

// IoOpsWeigher weighs hosts by their builds in flight (Nova's num_io_ops,
// instances in building and other I/O-heavy task states). Nova's default
// multiplier, -1.0, steers new builds away from busy hosts.
type IoOpsWeigher struct{}

var _ Weigher = IoOpsWeigher{}

func init() { registerWeigher("io_ops", func() Weigher { return IoOpsWeigher{} }) }

func (IoOpsWeigher) Name() string { return "IoOpsWeigher" }

func (IoOpsWeigher) Weigh(h *HostState, _ *Cycle) float64 { return float64(h.NumIOOps) }
