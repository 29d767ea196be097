// Package role names who runs where in an exec, and how a role fails.
//
// A role is one node process of a point: the server that serves the file,
// the client that reads it. Its Target is the host it runs on and the
// path of node there. Everything that can fail on the way to and during a
// point (reaching the host, deploying node, starting node, waiting for it
// to be ready, its run) fails as an *Error naming the role, its host and
// the phase, so callers decide with errors.As, never by reading text.
package role

import (
	"errors"
	"fmt"

	"rdmasweep/runner/hosts/remote"
)

// Target is where a role runs: a host and the absolute path of node there.
type Target struct {
	Role     string // "server", "client"
	Host     remote.Host
	Label    string // how messages name it: "server (alice@10.0.0.1:22)"
	NodePath string
	// PinsCPUs says the host binds the role to its CPUs itself (Slurm's
	// --cpu-bind), so node runs without taskset.
	PinsCPUs bool
}

// Phase is the step a role failed in, in the order an exec takes them.
type Phase string

const (
	Connect Phase = "connect" // dialing the host (SSH, jump hosts, host keys, login)
	Deploy  Phase = "deploy"  // putting node on the host
	Facts   Phase = "facts"   // asking the host about itself
	Start   Phase = "start"   // starting node
	Ready   Phase = "ready"   // node preparing, until it says it is ready
	Run     Phase = "run"     // node at work, until it exits
)

// Error is a role's failure. Its text is "LABEL: CAUSE", the form the CSV's
// error column and the runner's messages have always had.
type Error struct {
	Role  string // "server", "client"; "runner" for the point's own limits
	Host  string // the host's Name, or the plan's address before it is reached
	Label string // "server (alice@10.0.0.1:22)"
	Phase Phase
	Err   error
}

func (e *Error) Error() string { return e.Label + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf makes t's error in phase, its cause formatted as fmt.Errorf would.
func (t Target) Errorf(phase Phase, format string, args ...any) *Error {
	return t.Wrap(phase, fmt.Errorf(format, args...))
}

// Wrap makes err t's error in phase.
func (t Target) Wrap(phase Phase, err error) *Error {
	host := ""
	if t.Host != nil {
		host = t.Host.Name()
	}
	return &Error{Role: t.Role, Host: host, Label: t.Label, Phase: phase, Err: err}
}

// As returns err's role error, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
