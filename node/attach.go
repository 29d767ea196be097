package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
)

// attachDialTimeout bounds node attach's connect to the runner.
const attachDialTimeout = 30 * time.Second

// runAttach is node started before its command line is known: it dials
// the runner, proves itself with the token from its environment, reads
// its command line there, and runs it with the connection as its control
// channel in place of stdin (results/attach.go has the handshake). It
// stops, as a node under --control-stdin does, when the connection ends.
func runAttach(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	addr := fs.String("runner", "", "HOST:PORT of the runner to take the command line and control lines from")
	loop := fs.Bool("loop", false, "run one command after another (those --in-process names in this process, others as a child), mark each one's end on stdout and stderr, and attach again for the next, until the runner closes a connection before sending one")
	tokenStdin := fs.Bool("token-stdin", false, "read the token as the first line of stdin, not from "+results.AttachTokenEnv+", and end when stdin does (the runner's SSH session is then node's life)")
	inProc := fs.String("in-process", "read", "with --loop, the commands run in this process (read, serve), comma-separated; the others run as a child")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	own, err := inProcessSet(*inProc)
	if err != nil {
		return err
	}
	token := os.Getenv(results.AttachTokenEnv)
	os.Unsetenv(results.AttachTokenEnv)
	if *tokenStdin {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		if token, err = tokenFromStdin(e.stdin, cancel); err != nil {
			return err
		}
	}
	switch {
	case *addr == "":
		return usagef("attach: --runner is required")
	case token == "":
		return usagef("attach: %s is not set: the runner that starts node attach gives it a token", results.AttachTokenEnv)
	}
	key := results.AttachKey(token)
	if *loop {
		return attachLoop(ctx, e, *addr, key, own)
	}
	conn, argv, _, err := attachOnce(ctx, *addr, key)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("attach to the runner at %s: %w", *addr, context.Cause(ctx))
		}
		return attachError(*addr, err)
	}
	defer conn.Close()
	if argv[0] == "attach" {
		return usagef("attach: the runner's command is attach again")
	}
	// From here the connection is the command's stdin: the control lines,
	// and its end.
	return dispatch(ctx, &env{stdin: conn, stdout: e.stdout, stderr: e.stderr, out: e.out, attached: true}, argv)
}

// errNotRunner is a command line whose MAC does not prove the token:
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

// tokenFromStdin reads the token, stdin's first line, and then watches
// stdin on: its end cancels node attach, so that an agent the runner
// started over SSH does not outlive the runner's connection.
func tokenFromStdin(stdin io.Reader, cancel context.CancelCauseFunc) (string, error) {
	r := bufio.NewReaderSize(stdin, 256)
	line, err := r.ReadString('\n')
	token := strings.TrimSpace(line)
	if err != nil && token == "" {
		return "", usagef("attach: --token-stdin: no token on stdin: %v", err)
	}
	go func() {
		io.Copy(io.Discard, r)
		cancel(errStdinClosed)
	}()
	return token, nil
}

// readLineExactly reads one line from conn, without its newline, and
// nothing after it: what follows belongs to the command, which may be a
// child reading the socket itself. It peeks at what has arrived and takes
// the line whole when its end is there (the runner writes it in one go),
// else one byte, and looks again: a byte at a time throughout cost a
// command line's length in system calls.
func readLineExactly(conn *net.TCPConn) ([]byte, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var line []byte
	buf := make([]byte, 4096)
	for {
		var n int
		var perr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, perr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK)
			return perr != unix.EAGAIN
		}); err != nil {
			return line, err
		}
		switch {
		case perr != nil:
			return line, perr
		case n == 0:
			return line, io.EOF
		}
		take := 1
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			take = i + 1
		}
		got, err := io.ReadFull(conn, buf[:take])
		line = append(line, buf[:got]...)
		if err != nil {
			return line, err
		}
		if line[len(line)-1] == '\n' {
			return line[:len(line)-1], nil
		}
		if len(line) > results.MaxAttachLine {
			return line, fmt.Errorf("command line over %d bytes", results.MaxAttachLine)
		}
	}
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

// attachLoop is node attach --loop: one command after another, each with
// its own connection to the runner as its stdin (those in own in this
// process, others as a child), until the runner closes a connection
// without a command, or stdin ends under --token-stdin
// (results/attach.go has the rules). A node started once per host and role then serves every point:
// under Slurm a step per role and point cost more than the point's whole
// budget.
func attachLoop(ctx context.Context, e *env, addr string, key results.AttachKey, own map[string]bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("attach: find node's own binary: %w", err)
	}
	type attached struct {
		conn *net.TCPConn
		argv []string
		err  error
	}
	next := make(chan attached, 1)
	// Each dial is the previous one's successor, so key, set before the
	// next dial starts, needs no lock.
	dial := func() {
		conn, argv, nextKey, err := attachOnce(ctx, addr, key)
		key = nextKey
		next <- attached{conn, argv, err}
	}
	go dial()
	for n := 0; ; n++ {
		a := <-next
		if a.err != nil {
			if errors.Is(a.err, errNotRunner) {
				return attachError(addr, a.err)
			}
			if n > 0 && (errors.Is(a.err, errNoCommand) || ctx.Err() != nil) || runnerGone(ctx) {
				return nil // the runner is done with this node
			}
			return fmt.Errorf("attach to the runner at %s: %w", addr, a.err)
		}
		// Attach for the next command while this one runs, so the runner
		// holds the connection before it needs it: dialled after the
		// end, it came up to 23 ms late for 8 clients on 2 cores.
		go dial()
		var end results.AttachEnd
		if own[a.argv[0]] {
			end = runInProcess(ctx, e, a.argv, a.conn)
		} else if end, err = runChild(ctx, e, exe, a.argv, a.conn); err != nil {
			return err
		}
		b, _ := json.Marshal(end)
		line := results.AttachEndMarker + string(b) + "\n"
		io.WriteString(e.stdout, line)
		io.WriteString(e.stderr, line)
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
	return errors.Is(context.Cause(ctx), errStdinClosed)
}

// errNoCommand is a connection the runner closed before sending a command.
var errNoCommand = errors.New("the runner closed the connection before sending a command")

// attachOnce dials the runner, says hello with key's ID and a fresh
// nonce, reads one command and admits it only if its MAC proves key for
// that nonce and that argv; it returns the next connection's key. The
// command line is read without reading past it, so that nothing after it
// (the first control line) is taken from the socket a child will read.
func attachOnce(ctx context.Context, addr string, key results.AttachKey) (*net.TCPConn, []string, results.AttachKey, error) {
	d := net.Dialer{Timeout: attachDialTimeout}
	c, err := d.DialContext(ctx, results.Network, addr)
	if err != nil {
		return nil, nil, key, err
	}
	conn := c.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	fail := func(err error) (*net.TCPConn, []string, results.AttachKey, error) {
		conn.Close()
		return nil, nil, key, err
	}
	hello, nonce, err := results.NewAttachHello(key, os.Getpid())
	if err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(hello)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("send hello: %w", err))
	}
	line, err := readLineExactly(conn)
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return fail(errNoCommand)
		}
		return fail(fmt.Errorf("read the command: %w", err))
	}
	var cmd results.AttachCommand
	if json.Unmarshal(line, &cmd) != nil || !key.Admit(nonce, cmd) {
		return fail(errNotRunner)
	}
	if len(cmd.Argv) == 0 {
		return fail(errors.New("the runner sent an empty command"))
	}
	return conn, cmd.Argv, key.Next(nonce), nil
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

// runInProcess runs node argv in this process with conn as its stdin,
// and returns how it ended, with the status a child's exit would have
// had (exitStatus).
func runInProcess(ctx context.Context, e *env, argv []string, conn *net.TCPConn) results.AttachEnd {
	defer conn.Close()
	err := runEnv(ctx, &env{stdin: conn, stdout: e.stdout, stderr: e.stderr, attached: true}, argv)
	return results.AttachEnd{Status: exitStatus(ctx, err)}
}

// runChild runs node argv as a child with conn as its stdin, and returns
// how it ended. The end of ctx passes on to the child as SIGTERM.
func runChild(ctx context.Context, e *env, exe string, argv []string, conn *net.TCPConn) (results.AttachEnd, error) {
	f, err := conn.File() // a dup: the child's stdin, blocking
	conn.Close()
	if err != nil {
		return results.AttachEnd{}, fmt.Errorf("attach: hand the connection to the command: %w", err)
	}
	defer f.Close()
	if argv[0] == "attach" {
		fmt.Fprintln(e.stderr, "node: error: attach: the runner's command is attach again")
		return results.AttachEnd{Status: 2}, nil
	}
	cmd := exec.Command(exe, argv...)
	// The file this agent runs and checked (selfCheck), whatever its
	// path holds now.
	cmd.Path = selfExe
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, e.stdout, e.stderr
	cmd.Env = append(os.Environ(), attachedEnv+"=1")
	if err := cmd.Start(); err != nil {
		return results.AttachEnd{}, fmt.Errorf("attach: start %s: %w", argv[0], err)
	}
	f.Close() // the child's now: its end is the runner's close
	stop := context.AfterFunc(ctx, func() { cmd.Process.Signal(syscall.SIGTERM) })
	defer stop()
	cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return results.AttachEnd{Status: -1, Signal: strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG")}, nil
	}
	return results.AttachEnd{Status: cmd.ProcessState.ExitCode()}, nil
}
