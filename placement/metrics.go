package placement

import (
	"errors"

	"github.com/berth-project/berth/internal/metrics"
)

// SetMetrics makes the service count its allocation writes and their
// conflicts in m (nil: none). Call it before the service is used.
func (s *Service) SetMetrics(m *metrics.Metrics) { s.metrics = m }

// claimOutcome is the berth_placement_claims_total outcome of an
// allocation write's error.
func claimOutcome(err error) string {
	switch {
	case err == nil:
		return metrics.ClaimCommitted
	case errors.Is(err, ErrGuardFailed):
		return metrics.ClaimGuardFailed
	case errors.Is(err, ErrConcurrentUpdate):
		return metrics.ClaimConflict
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrInsufficientCapacity), errors.Is(err, ErrProviderNotFound),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrConsumerGenerationConflict), errors.Is(err, ErrGenerationConflict),
		errors.Is(err, ErrTooManyOps), errors.Is(err, ErrResourceClassNotFound):
		return metrics.ClaimRejected
	default:
		return metrics.ClaimError
	}
}
