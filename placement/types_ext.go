package placement

// The contract in types.go is extended here (fields cannot be added to
// types.go's structs without editing it, so the extension is by new
// types and documented defaults).

// ClaimOptions tune one allocation write beyond AllocationWrite.
type ClaimOptions struct {
	// IgnoreConsumerGeneration skips the consumer generation check, as
	// Placement does before microversion 1.28 and for DELETE.
	IgnoreConsumerGeneration bool
}
