package point

// What roles that are not node need: readiness from `ss -ltn` (or, for
// rdma_cm, `rdma resource show cm_id`) on their host, and report files
// read back from it.

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// listening is the update an OnListening role's poller sends once its
// port listens.
type listening struct{}

// listenPoll bounds the wait between two `ss -ltn` runs: short, since each
// is a round trip to the host anyway, and a server is usually up in tens
// of milliseconds.
const (
	listenPollFirst = 5 * time.Millisecond
	listenPollMax   = 50 * time.Millisecond
)

// listens runs ss -ltn on t's host and reports whether port listens; with
// cm, rdma resource show cm_id, and whether an rdma_cm id listens on it.
func listens(ctx context.Context, t role.Target, port int, cm bool) (bool, error) {
	cmd, parse, pkg := peer.ReadyCommand, peer.Listening, "iproute2"
	if cm {
		cmd, parse, pkg = peer.CMReadyCommand, peer.CMListening, "iproute2's rdma"
	}
	out, err := t.Host.Run(ctx, cmd)
	if err != nil {
		return false, fmt.Errorf("%s (%s) on the host: %w", strings.Join(cmd, " "), pkg, err)
	}
	return parse(out, port)
}

// portFree refuses to start a role whose port already listens: another
// program's socket would pass for the role's readiness, and its client
// would measure that program.
func portFree(ctx context.Context, t role.Target, port int, cm bool) error {
	busy, err := listens(ctx, t, port, cm)
	switch {
	case err != nil:
		return err
	case busy:
		return fmt.Errorf("port %d is already in use on the host (a leftover from an interrupted run exits at its deadline); set server.port to a free one", port)
	}
	return nil
}

// pollListening runs ss -ltn (with cm, rdma resource show cm_id) on t's
// host until port listens, then sends
// listening for role idx; a failure to run ss is sent as an error event.
// It stops when the role is gone, the point is abandoned or ctx ends.
func pollListening(ctx context.Context, t role.Target, port int, cm bool, idx int, updates chan<- update, abandon, gone <-chan struct{}) {
	send := func(ev any) {
		select {
		case updates <- update{role: idx, ev: ev}:
		case <-abandon:
		}
	}
	wait := listenPollFirst
	for {
		ok, err := listens(ctx, t, port, cm)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			send(&results.Error{Type: results.TypeError, Message: "await port " + fmt.Sprint(port) + ": " + err.Error()})
			return
		case ok:
			send(listening{})
			return
		}
		select {
		case <-time.After(wait):
		case <-abandon:
			return
		case <-gone:
			return // its exit tells why
		}
		wait = min(2*wait, listenPollMax)
	}
}

// collect reads back the report file of every OutputFile role, once all
// have exited, removes it from the host and keeps it beside the role's
// log.
func (x *execution) collect() error {
	for i, rl := range x.roles {
		if rl.Output != OutputFile {
			continue
		}
		b, err := fetchReport(x.ctx, rl.Target, rl.Report)
		if err != nil {
			if x.ctx.Err() != nil {
				return ErrInterrupted
			}
			return rl.Target.Errorf(role.Run, "%s exited, but its report %s cannot be read: %w", programName(rl.Tool), rl.Report, err)
		}
		x.reports[i].Output = b
		// Kept beside the role's log: the host's copy is gone.
		_ = outdir.WriteFile(fmt.Sprintf("%s.%s.report%s", x.logBase, rl.Target.Role, path.Ext(rl.Report)), b, outdir.Private)
	}
	return nil
}

// fetchReport prints a report file on its host and removes it. Neither
// follows a symlink: a link (or anything but a regular file) at the path
// is refused, and rm removes a link, never its target. The directory is
// the login user's own, checked before anything ran from it, so no one
// else could have put a link there between the check and the read; this
// is the second line of that defence. It takes only sh's test, cat and
// rm, which busybox hosts have too (their dd has no iflag=nofollow).
func fetchReport(ctx context.Context, t role.Target, file string) ([]byte, error) {
	return t.Host.Run(ctx, []string{"sh", "-c", reportScript, "sh", path.Clean(file)})
}

// reportScript prints $1 unless it is a symlink or not a regular file,
// and removes it either way.
const reportScript = `if [ -L "$1" ] || [ ! -f "$1" ]; then echo "$1 is not a regular file (a symbolic link?): not read" >&2; s=1; else cat -- "$1"; s=$?; fi; rm -f -- "$1"; exit $s`
