package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
)

// MoveAllocations gives consumer to every allocation consumer from holds
// and empties from, in one transaction: Nova's report client
// move_allocations, with which a cold move hands the source host's
// allocation from the instance to its migration (and a revert hands it
// back). As in Nova, what to held before is overwritten, not merged (on
// a revert, the destination's claim). Both consumers' generations are
// compared as read, so a concurrent change re-reads (up to 10 times)
// rather than moving a stale copy. moved is false when from held nothing:
// a move that already happened is not an error, so a crashed caller may
// repeat it.
func (s *Service) MoveAllocations(ctx context.Context, from, to string) (moved bool, err error) {
	for try := 0; try < 10; try++ {
		src, err := s.GetAllocations(ctx, from)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var toGen *int64
		switch dst, err := s.GetAllocations(ctx, to); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return false, err
		default:
			g := dst.Generation
			toGen = &g
		}
		fromGen := src.Generation
		allocs := make(map[string]ProviderAllocation, len(src.Allocations))
		for rp, a := range src.Allocations {
			allocs[rp] = ProviderAllocation{Resources: maps.Clone(a.Resources)}
		}
		_, err = s.writeAllocations(ctx, map[string]AllocationWrite{
			from: {ProjectID: src.ProjectID, UserID: src.UserID, ConsumerGeneration: &fromGen},
			to: {Allocations: allocs, ProjectID: src.ProjectID, UserID: src.UserID,
				ConsumerType: src.ConsumerType, ConsumerGeneration: toGen},
		}, ClaimOptions{}, false)
		if errors.Is(err, ErrConsumerGenerationConflict) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("move allocations of %s to %s: %w", from, to, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("move allocations of %s to %s: %w", from, to, ErrConcurrentUpdate)
}
