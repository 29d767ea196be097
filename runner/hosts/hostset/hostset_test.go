package hostset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// TestParallelRunsAllAndReportsTheFirstInOrder: every call runs, at once,
// and the error reported is the first in index order, not in time.
func TestParallelRunsAllAndReportsTheFirstInOrder(t *testing.T) {
	var ran atomic.Int32
	e1, e3 := errors.New("one"), errors.New("three")
	release := make(chan struct{})
	err := Parallel(4, func(i int) error {
		ran.Add(1)
		switch i {
		case 1:
			<-release // fails last in time, first in order
			return e1
		case 3:
			defer close(release)
			return e3
		}
		return nil
	})
	if ran.Load() != 4 || err != e1 {
		t.Fatalf("ran %d, err %v; want 4 and %v", ran.Load(), err, e1)
	}
}

// TestDialLocalPlan: a plan with both roles on this machine is one local
// host, run in place from node.binary, with a target per role and one
// per host.
func TestDialLocalPlan(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "node")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse("t.yaml", []byte(`name: t
hosts: {server: {address: local}, client: {address: local}}
node: {binary: `+bin+`}
server: {file: /tmp/t.dat, file_size: 1MiB}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Dial(context.Background(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Roles) != 2 || s.Get("server").NodePath != bin || s.Get("client").Label != "client (local)" {
		t.Fatalf("roles %+v", s.Roles)
	}
	if ts := s.Targets(); len(ts) != 1 || ts[0].Role != "server" {
		t.Fatalf("targets %+v, want the server's alone", ts)
	}
	var seen atomic.Int32
	err = s.EachRole(func(i int, tg role.Target) error {
		if _, ok := tg.Host.(remote.Local); !ok || s.Roles[i].Role != tg.Role {
			t.Errorf("role %d: %+v", i, tg)
		}
		seen.Add(1)
		return nil
	})
	if err != nil || seen.Load() != 2 {
		t.Fatalf("EachRole: %v, %d roles", err, seen.Load())
	}
}

// A host that refuses the runner stops even a pool's exec; a host that
// does not answer does not.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&role.Error{Role: "pool2", Err: &remote.AuthError{User: "u"}}, true},
		{fmt.Errorf("dial: %w", &remote.HostKeyChangedError{}), true},
		{&remote.UnknownHostError{}, true},
		{fmt.Errorf("connect to lab:22: %w", &remote.UnsafeNameError{Token: "%h", Err: errors.New("'$' at byte 2")}), true},
		{&role.Error{Role: "pool2", Err: errors.New("connect to 198.18.45.15:22: timed out after 5s")}, false},
		{errors.New("connect to 198.18.45.15:22: connection refused"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
