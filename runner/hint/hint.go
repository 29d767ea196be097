// Package hint gives an error the one line that says what the user can do
// about it. The runner prints it after the error as "runner: hint: …";
// packages only attach it, never print it. Any error in a chain with a
// Hint() string method counts, so a package's own typed errors (such as
// deploy.NoNodeError) carry theirs without this package.
package hint

import "errors"

// Hinted is an error that knows what the user can do about it.
type Hinted interface{ Hint() string }

type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }
func (e *hintError) Hint() string  { return e.hint }

// Wrap returns err with hint; errors.Is and errors.As still see err.
func Wrap(err error, hint string) error { return &hintError{err: err, hint: hint} }

// Of is the hint of the first error in err's chain that has one, or "".
func Of(err error) string {
	var h Hinted
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}
