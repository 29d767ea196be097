// Package remote gives the runner one way to drive a host, whether it is
// this machine (Local) or a machine reached over SSH (see ssh.go).
//
// Commands are argv slices, never shell strings: an implementation that
// needs a shell quotes every argument itself, so paths with spaces or quotes
// work. Commands must use absolute paths; nothing may depend on the login
// directory.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Host is one machine. A Host is safe for concurrent use; it holds one
// connection for its whole life, which Close ends.
type Host interface {
	// Name is how messages name the host: "local" or "user@address:port".
	Name() string
	// Run runs argv to completion and returns its stdout. A non-zero exit
	// is an *ExitError carrying stderr. Cancelling ctx stops the command.
	Run(ctx context.Context, argv []string) ([]byte, error)
	// Start starts argv with stdin, stdout and stderr pipes and returns at
	// once. The process leads its own process group. Cancelling ctx does
	// NOT kill it: the caller owns its lifecycle through Process.
	Start(ctx context.Context, argv []string) (Process, error)
	// Upload copies the local file to the absolute remote path atomically,
	// mode 0755, into a directory only the login user may change (made
	// 0700 when missing; one another user could change is refused with
	// an *UnsafePathError, see deploypath.go). It reports whether it was
	// already up to date (same sha256) and the bytes sent. A remote Host
	// then guards every Run and Start whose argv names the file: the file
	// is checked the same way before argv runs (Guard).
	Upload(ctx context.Context, local, remote string) (UploadResult, error)
	// Close ends the connection. Processes started on it lose their stdin.
	Close() error
}

// Process is a started command.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Signal delivers sig to the process's group, which it leads; it works
	// on a stopped process too, and on one that has not printed anything.
	Signal(sig os.Signal) error
	// Wait waits for exit; it returns nil, an *ExitError, or ErrConnectionLost.
	// Stdout and Stderr must be read to EOF before or while calling Wait.
	Wait() error
}

// UploadResult describes one Upload.
type UploadResult struct {
	// UpToDate says the remote file is the local one (same sha256): it
	// was there already, nothing was sent.
	UpToDate  bool
	BytesSent int64
}

// ErrConnectionLost means the host went away while a command ran.
var ErrConnectionLost = errors.New("connection lost")

// ExitError is a command's non-zero exit, or its death by a signal.
type ExitError struct {
	Status int    // exit status; -1 when killed by a signal
	Signal string // e.g. "KILL", "" when it exited
	Stderr []byte // set by Run
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Status)
}

// EndAll ends everything a Host's Close finds still running: it runs end
// on each of live at once and returns when every call has. live is the
// keys of the Host's set of live things, taken under its lock.
func EndAll[T comparable](live map[T]bool, end func(T)) {
	var wg sync.WaitGroup
	for x := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end(x)
		}()
	}
	wg.Wait()
}
