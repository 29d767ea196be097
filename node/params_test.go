package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"rdmasweep/node/transport/tcp"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// TestParamsAreNodeFlags holds node to the parameter table: every
// parameter's flag is one the subcommand it goes to takes, so the runner's
// argv, built from the table, is always understood.
func TestParamsAreNodeFlags(t *testing.T) {
	sets := map[string]*flag.FlagSet{}
	for sub, o := range map[string]interface{ addFlags(*flag.FlagSet) }{"serve": &serveOptions{}, "read": &readOptions{}} {
		sets[sub] = flag.NewFlagSet(sub, flag.ContinueOnError)
		o.addFlags(sets[sub])
	}
	for _, p := range results.Params() {
		for sub, fs := range sets {
			if p.TakenBy(sub) && fs.Lookup(p.Flag) == nil {
				t.Errorf("parameter %s: node %s has no --%s", p.Name, sub, p.Flag)
			}
		}
	}
}

// TestLimitsAreTheTables holds every limit node enforces, outside the
// rdma transport's own (checked by its package's tests, which need cgo),
// to the parameter table, which runner validate reads.
func TestLimitsAreTheTables(t *testing.T) {
	bs := results.ParamOf(param.BlockSize)
	if max, _, _ := bs.LimitFor("tcp"); max != tcp.MaxBlock {
		t.Errorf("block_size for tcp: table %d, tcp.MaxBlock %d", max, tcp.MaxBlock)
	}
	if bs.Max != maxBlockFlag {
		t.Errorf("block_size: table max %d, node read takes up to %d", bs.Max, maxBlockFlag)
	}
}

// TestParamFlagsBounded: node checks its parameters' flags against the
// schema's bounds as it parses them, naming the flag, and the command
// fails with a usage error before anything starts.
func TestParamFlagsBounded(t *testing.T) {
	read := []string{"read", "--server", "127.0.0.1:1"}
	serve := []string{"serve", "--file", "/nonexistent/f", "--file-size", "4KiB"}
	for _, tc := range []struct {
		args []string
		want string // the error's text, or "" for none from the schema
	}{
		{append(read, "--queue-depth", "0"), "read: --queue-depth must be at least 1 (got 0)"},
		{append(read, "--transport", "rdma", "--queue-depth", "5000"), "read: --queue-depth must be at most 4096 with --transport rdma: node's RDMA read loop holds 4096 reads in flight (got 5000)"},
		{append(read, "--block-size", "512MiB"), "read: --block-size must be at most 256MiB with --transport tcp: the tcp wire's largest reply (got 512MiB)"},
		{append(read, "--qps", "70000"), "read: --qps must be at most 65536 (got 70000)"},
		{append(read, "--qps", "0", "--pattern", "zigzag"), "read: --qps must be at least 1 (got 0); --pattern must be sequential or random (got \"zigzag\")"},
		{append(read, "--warmup", "-1s"), "read: --warmup must be at least 0s (got -1s)"},
		{append(read, "--max-rd-atomic", "256"), "read: --max-rd-atomic must be at most 255 (got 256)"},
		{append(read, "--cq-moderation", "-1"), "read: --cq-moderation must be at least 1 (got -1)"},
		{append(read, "--ib-port", "-1"), "read: --ib-port must be at least 1 (got -1)"},
		{append(read, "--rdma-connect", "udp"), "read: --rdma-connect must be tcp or cm (got \"udp\")"},
		{append(read, "--transport", "smoke"), "read: --transport must be tcp or rdma (got \"smoke\")"},
		{append(serve, "--service-level", "16"), "serve: --service-level must be at most 15 (got 16)"},
		{append(serve, "--port", "70000"), "serve: --port must be at most 65535 (got 70000)"},
		{append(serve, "--cache", "hot"), "serve: --cache must be cold or warm (got \"hot\")"},
		{[]string{"serve", "--file", "/nonexistent/f"}, "serve: --file-size must be at least 1 (got 0)"},
		{[]string{"prepare", "--file", "/f", "--file-size", "1", "--registration", "lazy"}, "prepare: --registration must be pinned or odp (got \"lazy\")"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
		if !errors.As(err, new(usageError)) || err.Error() != tc.want {
			t.Errorf("node %s: %v\nwant the usage error %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestParamFlagsAutoAndDefaults: node's own defaults pass the schema's
// bounds, and an auto parameter at its flag's default (node's auto) is not
// bounded.
func TestParamFlagsAutoAndDefaults(t *testing.T) {
	for sub, o := range map[string]interface{ addFlags(*flag.FlagSet) }{"serve": &serveOptions{}, "read": &readOptions{}} {
		fs := flag.NewFlagSet(sub, flag.ContinueOnError)
		o.addFlags(fs)
		for _, tr := range []string{"tcp", "rdma"} {
			err := checkParamFlags(fs, sub, sub, tr)
			if sub == "serve" {
				// --file-size has no default: serve must be told it.
				if err == nil || !strings.Contains(err.Error(), "--file-size") || strings.Contains(err.Error(), ";") {
					t.Errorf("serve's defaults under %s: %v, want only --file-size refused", tr, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("read's defaults under %s: %v", tr, err)
			}
		}
	}
}
