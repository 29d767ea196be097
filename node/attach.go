package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/session"
	"rdmasweep/results"
)

// attachDialTimeout bounds node attach's connect to the runner.
const attachDialTimeout = 30 * time.Second

// childWaitDelay bounds how long an attached child's output is waited
// for once it has exited: a descendant it left may hold its pipes.
const childWaitDelay = 2 * time.Second

// runAttach is node started before its command line is known: it dials
// the runner, says hello, opens its command line from the sealed channel
// that follows, and runs it with that channel as its stdin, stdout and
// stderr (results/attach.go has the protocol). It stops, as a node under
// --control-stdin does, when the runner ends its stdin or the connection.
func runAttach(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	addr := fs.String("runner", "", "HOST:PORT of the runner to take the command line and control lines from")
	loop := fs.Bool("loop", false, "run one command after another (those --in-process names in this process, others as a child), and attach again for the next, until the runner closes a connection before sending one")
	tokenStdin := fs.Bool("token-stdin", false, "read the token as the first line of stdin, not from the environment, and end when stdin does (the runner's SSH session is then node's life)")
	inProc := fs.String("in-process", "read", "with --loop, the commands run in this process (read, serve), comma-separated; the others run as a child")
	mungeSocket := fs.String("munge-socket", "", "munged's socket, for unmunge to decode "+results.AttachCredEnv+" (default: MUNGE's own)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	own, err := inProcessSet(*inProc)
	if err != nil {
		return err
	}
	if *addr == "" {
		return usagef("attach: --runner is required")
	}
	token, err := attachToken(ctx, e, *tokenStdin, *mungeSocket)
	if err != nil {
		return err
	}
	if *tokenStdin {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			io.Copy(io.Discard, e.stdin)
			cancel(session.ErrStdinClosed)
		}()
	}
	key := results.AttachKey(token)
	if *loop {
		return attachLoop(ctx, e, *addr, key, own)
	}
	a, err := attachOnce(ctx, *addr, key)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("attach to the runner at %s: %w", *addr, context.Cause(ctx))
		}
		return attachError(*addr, err)
	}
	end := runInProcess(ctx, a)
	if end.Status != 0 {
		return exitCode(end.Status) // the command said why, to the runner
	}
	return nil
}

// attachToken is node attach's token: from a MUNGE credential in
// AttachCredEnv (Slurm), stdin's first line (--token-stdin, SSH), or
// AttachTokenEnv. Both variables are unset, so no child sees them.
func attachToken(ctx context.Context, e *env, fromStdin bool, mungeSocket string) (string, error) {
	cred, token := os.Getenv(results.AttachCredEnv), os.Getenv(results.AttachTokenEnv)
	os.Unsetenv(results.AttachCredEnv)
	os.Unsetenv(results.AttachTokenEnv)
	switch {
	case fromStdin:
		return tokenFromStdin(e)
	case cred != "":
		return unmunge(ctx, cred, mungeSocket)
	case token != "":
		return token, nil
	}
	return "", usagef("attach: neither %s nor %s is set: the runner that starts node attach gives it a token", results.AttachCredEnv, results.AttachTokenEnv)
}

// tokenFromStdin reads the token, stdin's first line, a byte at a time:
// what follows is left for the watch on stdin's end.
func tokenFromStdin(e *env) (string, error) {
	var line []byte
	one := make([]byte, 1)
	for len(line) < 256 {
		n, err := e.stdin.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				break
			}
			line = append(line, one[0])
		}
		if err != nil {
			if len(line) == 0 {
				return "", usagef("attach: --token-stdin: no token on stdin: %v", err)
			}
			break
		}
	}
	return strings.TrimSpace(string(line)), nil
}

// unmunge decodes cred, a MUNGE credential, with MUNGE's unmunge: node
// is static and speaks no MUNGE itself, and unmunge is on every node
// whose slurmd authenticates with MUNGE. The credential must decode
// without error (not expired, not replayed), have been encrypted (a
// cipher other than none), and have been made by this process's own
// UID; its payload is the token.
func unmunge(ctx context.Context, cred, socket string) (string, error) {
	args := []string{"--numeric", "--keys=STATUS,CIPHER,UID"}
	if socket != "" {
		args = append(args, "--socket="+socket)
	}
	cmd := exec.CommandContext(ctx, "unmunge", args...)
	cmd.Stdin = strings.NewReader(cred)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("attach: decode the token's MUNGE credential: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	meta, payload, ok := strings.Cut(string(out), "\n\n")
	fields := map[string]string{}
	for _, l := range strings.Split(meta, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	switch {
	case !ok || fields["STATUS"] != "0":
		return "", fmt.Errorf("attach: decode the token's MUNGE credential: status %q", fields["STATUS"])
	case fields["CIPHER"] == "" || fields["CIPHER"] == "0":
		return "", errors.New("attach: the token's MUNGE credential is not encrypted (cipher none): refused")
	case fields["UID"] != strconv.Itoa(os.Getuid()):
		return "", fmt.Errorf("attach: the token's MUNGE credential was made by UID %s, not this node's user %d: refused", fields["UID"], os.Getuid())
	case strings.TrimSpace(payload) == "":
		return "", errors.New("attach: the token's MUNGE credential is empty")
	}
	return strings.TrimSpace(payload), nil
}

// errNotRunner is a first frame that does not open under the key:
// whoever answered node's connection is not the runner that started it.
var errNotRunner = errors.New("did not prove it holds the token; nothing was run")

// attachError words a failed attach: a refusal names the runner's address
// as the one that failed to prove itself.
func attachError(addr string, err error) error {
	if errors.Is(err, errNotRunner) {
		return fmt.Errorf("attach: the runner at %s %w", addr, err)
	}
	return fmt.Errorf("attach to the runner at %s: %w", addr, err)
}

// inProcessSet parses --in-process: the commands --loop runs in its own
// process.
func inProcessSet(list string) (map[string]bool, error) {
	own := map[string]bool{}
	for _, c := range strings.Split(list, ",") {
		switch c = strings.TrimSpace(c); c {
		case "":
		case "read", "serve":
			own[c] = true
		default:
			return nil, usagef("attach: --in-process %q: want read, serve or both, comma-separated", c)
		}
	}
	return own, nil
}

// attachLoop is node attach --loop: one command after another, each over
// its own connection to the runner (those in own in this process, others
// as a child), until the runner closes a connection without a command,
// or stdin ends under --token-stdin (results/attach.go has the rules). A
// node started once per host and role then serves every point: under
// Slurm a step per role and point cost more than the point's whole
// budget.
func attachLoop(ctx context.Context, e *env, addr string, key results.AttachKey, own map[string]bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("attach: find node's own binary: %w", err)
	}
	type attached struct {
		a   *attachment
		err error
	}
	next := make(chan attached, 1)
	// Each dial is the previous one's successor, so key, set before the
	// next dial starts, needs no lock.
	dial := func() {
		a, err := attachOnce(ctx, addr, key)
		if err == nil {
			key = a.next
		}
		next <- attached{a, err}
	}
	go dial()
	for n := 0; ; n++ {
		at := <-next
		if at.err != nil {
			if errors.Is(at.err, errNotRunner) {
				return attachError(addr, at.err)
			}
			if n > 0 && (errors.Is(at.err, errNoCommand) || ctx.Err() != nil) || runnerGone(ctx) {
				return nil // the runner is done with this node
			}
			return fmt.Errorf("attach to the runner at %s: %w", addr, at.err)
		}
		// Attach for the next command while this one runs, so the runner
		// holds the connection before it needs it: dialled after the
		// end, it came up to 23 ms late for 8 clients on 2 cores.
		go dial()
		if own[at.a.argv[0]] {
			runInProcess(ctx, at.a)
		} else if err := runChild(ctx, exe, at.a); err != nil {
			return err
		}
		if runnerGone(ctx) {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// runnerGone reports whether ctx ended with stdin (--token-stdin): the
// runner closed the agent's session, its normal end, whenever it comes.
func runnerGone(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), session.ErrStdinClosed)
}

// errNoCommand is a connection the runner closed before sending a command.
var errNoCommand = errors.New("the runner closed the connection before sending a command")

// attachment is one command's connection: its sealed channel, the
// command line opened from it, and the key of the next connection.
type attachment struct {
	conn *net.TCPConn
	ch   *results.AttachChannel
	argv []string
	next results.AttachKey
}

// attachOnce dials the runner, says hello with key's ID and a fresh
// nonce, and opens the command from the sealed channel under key and
// that nonce; whoever cannot seal it gets errNotRunner.
func attachOnce(ctx context.Context, addr string, key results.AttachKey) (*attachment, error) {
	d := net.Dialer{Timeout: attachDialTimeout}
	c, err := d.DialContext(ctx, results.Network, addr)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	fail := func(err error) (*attachment, error) {
		conn.Close()
		return nil, err
	}
	hello, nonce, err := results.NewAttachHello(key, os.Getpid())
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(hello)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("send hello: %w", err))
	}
	ch := key.NodeChannel(bufio.NewReader(conn), conn, nonce)
	argv, err := ch.RecvCommand()
	switch {
	case errors.Is(err, io.EOF):
		return fail(errNoCommand)
	case errors.Is(err, results.ErrAttachFrame) || errors.Is(err, io.ErrUnexpectedEOF):
		return fail(errNotRunner)
	case err != nil:
		return fail(fmt.Errorf("read the command: %w", err))
	case len(argv) == 0:
		return fail(errors.New("the runner sent an empty command"))
	}
	return &attachment{conn: conn, ch: ch, argv: argv, next: key.Next(nonce)}, nil
}

// feedStdin writes the runner's stdin frames to w until their end, the
// connection's end, or a frame that does not open, and then closes w: the
// command's stdin ends, which stops it. A frame that does not open is
// told on node attach's own stderr.
func (a *attachment) feedStdin(w io.WriteCloser, stderr io.Writer) {
	defer w.Close()
	for {
		kind, b, err := a.ch.Recv()
		switch {
		case errors.Is(err, results.ErrAttachFrame):
			fmt.Fprintf(stderr, "node: warning: attach: %v: the command's stdin ends\n", err)
			return
		case err != nil:
			return
		case kind == results.FrameStdinEnd:
			return
		case kind != results.FrameStdin:
			fmt.Fprintf(stderr, "node: warning: attach: a frame of kind %q on stdin: the command's stdin ends\n", kind)
			return
		}
		w.Write(b) // the command gone: its end comes
	}
}

// finish sends how the command ended, and closes the connection.
func (a *attachment) finish(end results.AttachEnd) {
	b, _ := json.Marshal(end)
	a.ch.Send(results.FrameEnd, b) // the runner gone: it knows
	a.conn.Close()
}

// Which commands node attach --loop runs in its own process (--in-process,
// by default read). A client, node read, does under Slurm: a fan-in of 8
// starts 8 of them a point, and each exec and Go runtime start cost about
// 10 ms of CPU (19 on a loaded machine), which on 2 cores was most of
// what a point's start cost beyond the goal. Under Slurm node serve stays
// a child: it maps and registers the file, and the kernel's cleanup on
// its exit is the one to trust. The SSH agents of a pairwise or ring
// sweep run serve in process too (docs/scale.md): a round at 64 hosts
// starts 32 servers, and each exec cost more than the round's budget. A
// command that is stuck past its stop grace ends node attach itself
// (exitIfStuck), and the runner sees its agent end.

// runInProcess runs the command in this process, its stdin, stdout and
// stderr the channel's, and returns how it ended, with the status a
// child's exit would have had (exitStatus).
func runInProcess(ctx context.Context, a *attachment) results.AttachEnd {
	stdinR, stdinW := io.Pipe()
	go a.feedStdin(stdinW, os.Stderr)
	err := runEnv(ctx, &env{stdin: stdinR, stdout: a.ch.Writer(results.FrameStdout), stderr: a.ch.Writer(results.FrameStderr), attached: true}, a.argv)
	end := results.AttachEnd{Status: exitStatus(ctx, err)}
	stdinR.Close()
	a.finish(end)
	return end
}

// runChild runs the command as a child, its stdin, stdout and stderr
// piped to and from the channel. The end of ctx passes on to the child as
// SIGTERM.
func runChild(ctx context.Context, exe string, a *attachment) error {
	defer a.conn.Close()
	if a.argv[0] == "attach" {
		fmt.Fprintln(a.ch.Writer(results.FrameStderr), "node: error: attach: the runner's command is attach again")
		a.finish(results.AttachEnd{Status: 2})
		return nil
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("attach: a pipe for the command's stdin: %w", err)
	}
	go a.feedStdin(stdinW, os.Stderr)
	cmd := exec.Command(exe, a.argv...)
	// The file this agent runs and checked (selfCheck), whatever its
	// path holds now.
	cmd.Path = selfExe
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, a.ch.Writer(results.FrameStdout), a.ch.Writer(results.FrameStderr)
	cmd.WaitDelay = childWaitDelay
	cmd.Env = append(os.Environ(), attachedEnv+"=1")
	err = cmd.Start()
	stdinR.Close() // the child's now
	if err != nil {
		stdinW.Close()
		return fmt.Errorf("attach: start %s: %w", a.argv[0], err)
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Signal(syscall.SIGTERM) })
	defer stop()
	cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		a.finish(results.AttachEnd{Status: -1, Signal: strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG")})
	} else {
		a.finish(results.AttachEnd{Status: cmd.ProcessState.ExitCode()})
	}
	return nil
}

// errNotPeer is an attached node run of a program that is neither a
// peer's nor node.
var errNotPeer = errors.New("an attached node runs only the peers' programs and node itself")

// attachedProgram refuses what an attached `node run` may not start: the
// runner starts only the peers' programs, by name (results.PeerPrograms),
// and node itself (a peer of node's own, such as nvmeof), so any other
// program is not the runner's asking. node itself may not be asked to
// run or attach in its turn.
func attachedProgram(argv []string) error {
	if slices.Contains(results.PeerPrograms, argv[0]) {
		if err := results.CheckPeerArgs(argv); err != nil {
			return fmt.Errorf("run: %w: %w", errNotPeer, err)
		}
		return nil
	}
	if isSelf(argv[0]) {
		if len(argv) < 2 || argv[1] == "run" || argv[1] == "attach" || !slices.Contains(commandNames(), argv[1]) {
			return fmt.Errorf("run: %w: node %s refused", errNotPeer, strings.Join(argv[1:min(len(argv), 2)], ""))
		}
		return nil
	}
	return fmt.Errorf("run: %w (%s), not %q", errNotPeer, strings.Join(results.PeerPrograms, ", "), argv[0])
}

// isSelf reports whether path names the file this process runs.
func isSelf(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	self, err := os.Stat(selfExe)
	return err == nil && os.SameFile(fi, self)
}
