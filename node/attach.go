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
	"time"

	"rdmasweep/results"
)

func init() { commands["attach"] = runAttach }

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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	token := os.Getenv(results.AttachTokenEnv)
	switch {
	case *addr == "":
		return usagef("attach: --runner is required")
	case token == "":
		return usagef("attach: %s is not set: the runner that starts node attach gives it a token", results.AttachTokenEnv)
	}
	os.Unsetenv(results.AttachTokenEnv)
	d := net.Dialer{Timeout: attachDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", *addr)
	if err != nil {
		return fmt.Errorf("attach to the runner at %s: %w", *addr, err)
	}
	defer conn.Close()
	// A signal or the end of ctx ends the wait for the command line too.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	hello, _ := json.Marshal(results.AttachHello{Token: token, Pid: os.Getpid()})
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		return fmt.Errorf("attach to the runner at %s: send hello: %w", *addr, err)
	}
	r := bufio.NewReaderSize(conn, 4096)
	argv, err := readAttachCommand(r)
	if !stop() {
		return fmt.Errorf("attach to the runner at %s: %w", *addr, context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("attach to the runner at %s: %w", *addr, err)
	}
	if len(argv) > 0 && argv[0] == "attach" {
		return usagef("attach: the runner's command is attach again")
	}
	// From here the connection is the command's stdin: the control lines,
	// and its end.
	return dispatch(ctx, &env{stdin: r, stdout: e.stdout, stderr: e.stderr, out: e.out}, argv)
}

// readAttachCommand reads the runner's AttachCommand line.
func readAttachCommand(r *bufio.Reader) ([]string, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > results.MaxAttachLine {
			return nil, fmt.Errorf("command line over %d bytes", results.MaxAttachLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the runner closed the connection before sending a command")
			}
			return nil, fmt.Errorf("read the command: %w", err)
		}
		break
	}
	var c results.AttachCommand
	if err := json.Unmarshal(line, &c); err != nil {
		return nil, fmt.Errorf("parse the command: %w", err)
	}
	if len(c.Argv) == 0 {
		return nil, errors.New("the runner sent an empty command")
	}
	return c.Argv, nil
}
