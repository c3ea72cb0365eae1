package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/berth-project/berth/api"
)

// Exit statuses, so that a script can tell what went wrong without
// reading the message. Documented in `berth --help` (rootLong) and the
// README.
const (
	exitOK = 0
	// exitFailure: the command ran and failed (a 4xx other than 404, a
	// server that went to ERROR, a conflict).
	exitFailure = 1
	// exitUsage: the command line is wrong (unknown command or flag,
	// missing or extra argument); nothing was sent.
	exitUsage = 2
	// exitNotFound: a resource named on the command line does not exist
	// (404, or no resource has that name).
	exitNotFound = 3
	// exitUnavailable: the API could not be reached or could not answer
	// (connection refused, timeout, 5xx): trying again later may work.
	exitUnavailable = 4
)

// usageError is a mistake in the command line: exit 2, with a hint to
// run --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// exitError carries an exit status chosen by the command; err nil means
// the command has already said why on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// codeErr turns a status returned by an older int-returning command into
// an error for cobra: nil for 0, else an already reported exitError.
func codeErr(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}

// notFoundError is a resource the command line names that does not exist.
type notFoundError struct{ what, name string }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("no %s named or with id %q", e.what, e.name)
}

// exitCodeOf maps an error from a command to the process's exit status.
func exitCodeOf(err error) int {
	var (
		ue  *usageError
		ee  *exitError
		nf  *notFoundError
		ae  *api.APIError
		gce gophercloud.ErrUnexpectedResponseCode
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &nf):
		return exitNotFound
	case errors.As(err, &ae):
		return statusExit(ae.Status)
	case errors.As(err, &gce):
		return statusExit(gce.Actual)
	case unreachable(err):
		return exitUnavailable
	}
	return exitFailure
}

// statusExit is the exit status for an HTTP error status.
func statusExit(status int) int {
	switch {
	case status == 404:
		return exitNotFound
	case status >= 500:
		return exitUnavailable
	}
	return exitFailure
}

// unreachable reports an error of the transport rather than an answer:
// connection refused or reset, DNS, timeouts.
func unreachable(err error) bool {
	var (
		ne net.Error
		ue *url.Error
		oe *net.OpError
	)
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded) || errors.As(err, &oe) || errors.As(err, &ue) || errors.As(err, &ne)
}
