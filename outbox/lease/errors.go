package lease

import (
	"errors"
	"fmt"
)

// ErrMisconfigured marks a configuration that cannot work: a bucket count
// below one, an empty relay id, a lease read that does not match its
// request. outbox.ErrMisconfigured is this error, so errors.Is with either
// recognises the lease package's too.
var ErrMisconfigured = errors.New("outbox: misconfigured")

// MisconfigurationError reports a configuration that cannot work. It matches
// ErrMisconfigured with errors.Is and is never retried by the relay.
type MisconfigurationError struct {
	// Op is the operation that detected the problem, e.g. "acquire leases".
	Op string
	// Detail says what is wrong and how to fix it.
	Detail string
}

// Error implements error.
func (e *MisconfigurationError) Error() string {
	return fmt.Sprintf("outbox: %s: misconfigured: %s", e.Op, e.Detail)
}

// Is reports whether target is ErrMisconfigured.
func (e *MisconfigurationError) Is(target error) bool { return target == ErrMisconfigured }

// Misconfigured returns a *MisconfigurationError for op with a formatted detail.
func Misconfigured(op, format string, args ...any) error {
	return &MisconfigurationError{Op: op, Detail: fmt.Sprintf(format, args...)}
}
