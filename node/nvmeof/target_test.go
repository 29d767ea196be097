package nvmeof

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"rdmasweep/node/procstat"
	"rdmasweep/testbed/testenv"
	"testing"
)

// fakeSys is a Sys over a temporary directory with nvmet's three
// top-level directories, as configfs has them once nvmet is loaded.
func fakeSys(t *testing.T) Sys {
	d := t.TempDir()
	s := Sys{Configfs: filepath.Join(d, "config"), Records: filepath.Join(d, "records"), Class: filepath.Join(d, "class")}
	for _, sub := range []string{"hosts", "subsystems", "ports"} {
		if err := os.MkdirAll(filepath.Join(s.nvmet(), sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestSetupLeavesOthersAlone: a subsystem of the same NQN made by hand
// before the run makes Setup fail with ErrExists, and what Setup made
// before it (the host entry) is removed while the hand-made one and its
// contents stay; no record is left.
func TestSetupLeavesOthersAlone(t *testing.T) {
	s := fakeSys(t)
	tg := Target{NQN: "nqn.2014-08.org.example:hand", HostNQN: "nqn.2014-08.org.example:host", Transport: "tcp", Addr: "10.0.0.1", Path: "/f", Serial: "00"}
	hand := filepath.Join(s.nvmet(), "subsystems", tg.NQN)
	if err := os.MkdirAll(filepath.Join(hand, "namespaces"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := s.Setup(context.Background(), tg)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Setup over a hand-made subsystem: %v, want ErrExists", err)
	}
	if _, err := os.Stat(filepath.Join(hand, "namespaces")); err != nil {
		t.Errorf("the hand-made subsystem was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.nvmet(), "hosts", tg.HostNQN)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the host entry Setup made is still there (%v)", err)
	}
	if ents, _ := os.ReadDir(s.Records); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}
}

// TestCleanOnlyDeadMakers: Clean tears down a record whose maker is gone
// (its paths, then the record) and keeps one whose maker runs, and a path
// a record names outside nvmet's directory is never removed.
func TestCleanOnlyDeadMakers(t *testing.T) {
	if emu := os.Getenv("RDMASWEEP_NODE_EXEC"); emu != "" {
		// make test-arm64 leaves it out (-skip); make test runs it natively.
		testenv.Skip(t, "under "+emu+", whose made-up /proc/PID/stat gives the start time of the thread that reads it, so a live maker read from another Go thread looks gone")
	}
	s := fakeSys(t)
	os.MkdirAll(s.Records, 0o700)
	mk := func(name string, pid int, start string, paths ...string) {
		for _, p := range paths {
			os.MkdirAll(p, 0o755)
		}
		b, _ := json.Marshal(Made{Target: Target{NQN: name}, PortID: 7, Paths: paths, PID: pid, Start: start})
		os.WriteFile(filepath.Join(s.Records, "target-"+name+".json"), b, 0o600)
	}
	dead := filepath.Join(s.nvmet(), "subsystems", "dead")
	live := filepath.Join(s.nvmet(), "subsystems", "live")
	outside := filepath.Join(filepath.Dir(s.Configfs), "outside")
	mk("dead", 1<<22, "1", dead, outside) // no such pid
	mk("live", os.Getpid(), procstat.StartTime(os.Getpid()), live)
	done, err := s.Clean(context.Background(), "")
	if _, e := os.Stat(dead); !errors.Is(e, os.ErrNotExist) {
		t.Errorf("the dead maker's subsystem is still there (%v)", e)
	}
	if _, e := os.Stat(live); e != nil {
		t.Errorf("the running maker's subsystem was removed: %v", e)
	}
	if _, e := os.Stat(outside); e != nil || err == nil {
		t.Errorf("a recorded path outside nvmet: removed (%v), Clean's error %v; want kept and said", e, err)
	}
	t.Logf("cleaned %v; %v", done, err)
}
