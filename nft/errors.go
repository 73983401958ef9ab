package nft

import (
	"errors"
	"fmt"
	"syscall"
)

// Error is the error of a transaction that the kernel refused or whose
// outcome is unknown. Its text says what the transaction was doing and which
// operation failed:
//
//	apply to table inet nftep (3 chains added, 1 rewritten): add rule 2 to chain "filter-tw-x" (comment "…"): operation not supported
//
// errors.Is(err, syscall.EOPNOTSUPP) and the like work on it.
type Error struct {
	// Table is "<family> <name>".
	Table string
	// Summary says what the transaction was doing (Transaction.Summary).
	Summary string
	// Op names the operation the kernel refused first, in batch order;
	// empty when the failure is not about one operation.
	Op string
	// Err is the kernel's error (a syscall.Errno) or the I/O error.
	Err error
	// More is the number of further operations the kernel refused. They
	// are often consequences of the first (rules of a chain that failed).
	More int

	unknown bool
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("apply to table %s (%s)", e.Table, e.Summary)
	if e.Op != "" {
		s += ": " + e.Op
	}
	s += ": " + e.Err.Error()
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more operations refused)", e.More)
	}
	if e.unknown {
		s += " (outcome unknown: resync needed)"
	}
	return s
}

// Unwrap returns the kernel's error.
func (e *Error) Unwrap() error { return e.Err }

// IsStateUnknown reports whether err means a transaction may or may not have
// been committed: the kernel's answer was lost (ENOBUFS on the reply, the
// batch committed but the acknowledgement was dropped). Only a read of the
// kernel's table can tell; Table.Apply does one next time by itself.
func IsStateUnknown(err error) bool {
	var e *Error
	if errors.As(err, &e) && e.unknown {
		return true
	}
	return errors.Is(err, syscall.ENOBUFS)
}

// invalidError wraps a validation error: the model holds an object the
// kernel must not be asked to take, and nothing was sent.
type invalidError struct{ err error }

// Error returns the validation error's text.
func (e *invalidError) Error() string { return e.err.Error() }

// Unwrap returns the validation error.
func (e *invalidError) Unwrap() error { return e.err }

// IsInvalid reports whether err comes from validating the desired model: an
// object in it is invalid, and nothing was sent to the kernel. Fix the model
// and Apply again.
func IsInvalid(err error) bool {
	var e *invalidError
	return errors.As(err, &e) || errors.Is(err, ErrInvalid)
}
