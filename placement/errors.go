package placement

import (
	"errors"
	"fmt"
)

// Errors added beside the contract in types.go; the HTTP layer maps each to
// a status and a Placement error code.
var (
	// ErrDuplicateName: another provider already has the name (409).
	ErrDuplicateName = errors.New("placement: duplicate resource provider name")
	// ErrDuplicateUUID: a provider with the uuid already exists (409).
	ErrDuplicateUUID = errors.New("placement: duplicate resource provider uuid")
	// ErrGenerationConflict: the caller's provider generation is stale (409
	// placement.concurrent_update).
	ErrGenerationConflict = errors.New("placement: resource provider generation conflict")
	// ErrProviderInUse: the provider still has allocations (409
	// placement.resource_provider.inuse).
	ErrProviderInUse = errors.New("placement: resource provider in use")
	// ErrProviderHasChildren: a parent cannot be deleted (409
	// placement.resource_provider.cannot_delete_parent).
	ErrProviderHasChildren = errors.New("placement: resource provider has children")
	// ErrInventoryInUse: removing an allocated class's inventory (409
	// placement.inventory.inuse).
	ErrInventoryInUse = errors.New("placement: inventory in use")
	// ErrInvalid: the request breaks a rule (400).
	ErrInvalid = errors.New("placement: invalid request")
	// ErrTooManyOps: the write would need more operations than etcd allows
	// in one transaction.
	ErrTooManyOps = errors.New("placement: too many operations for one etcd transaction")
	// ErrGuardFailed: a caller's guard (ClaimOptions.Guards) did not hold,
	// so nothing was written.
	ErrGuardFailed = errors.New("placement: write precondition failed")
)

// maxTxnOps is etcd's default --max-txn-ops: the most compares, and the
// most operations, one transaction may hold.
const maxTxnOps = 128

// detailError carries the message Placement shows for an error beside the
// sentinel it stands for, so the HTTP layer can answer in Placement's words
// while callers test errors.Is(err, ErrX).
type detailError struct {
	kind error
	msg  string
}

func (e *detailError) Error() string { return e.msg + ": " + e.kind.Error() }
func (e *detailError) Unwrap() error { return e.kind }

func detailf(kind error, format string, args ...any) error {
	return &detailError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// errDetail is the Placement-worded message of err, or err's text.
func errDetail(err error) string {
	var d *detailError
	if errors.As(err, &d) {
		return d.msg
	}
	return err.Error()
}

// Detail is the message Placement shows for err: the words an engine
// error carries beside its sentinel (ErrInvalid, ErrInventoryInUse, ...),
// or err's text when it carries none. The HTTP API answers with it.
func Detail(err error) string { return errDetail(err) }
