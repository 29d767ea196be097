package leftover

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// sleeper starts a process that stands in for a node left running by a
// runner that was killed: its own process group, like node under sshd.
func sleeper(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	bin, _ = filepath.EvalSymlinks(bin)
	cmd := exec.Command(bin, "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bin
}

func identity(t *testing.T, pid int) (boot, start string) {
	t.Helper()
	s := &Record{}
	id, err := s.identify(context.Background(), remote.Local{}, pid)
	if err != nil || id.boot == "" || id.start == "" {
		t.Fatalf("identify %d: %+v %v", pid, id, err)
	}
	return id.boot, id.start
}

func alive(cmd *exec.Cmd) bool {
	done := make(chan struct{})
	go func() { cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(500 * time.Millisecond):
		return true
	}
}

func writeState(t *testing.T, path string, entries ...Entry) {
	t.Helper()
	b, _ := json.Marshal(entries)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenStateKillsOnlyTheVerySameProcess(t *testing.T) {
	local := role.Target{Host: remote.Local{}, Label: "server (local)"}
	for _, tc := range []struct {
		name     string
		mangle   func(e *Entry)
		wantKill bool
	}{
		{"same boot, start time and executable", func(e *Entry) {}, true},
		{"pid reused: other start time", func(e *Entry) { e.StartTime += "1" }, false},
		{"other boot", func(e *Entry) { e.BootID = "00000000-0000-0000-0000-000000000000" }, false},
		{"other executable", func(e *Entry) { e.Exe = "/opt/rdmasweep/node" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, bin := sleeper(t)
			pid := cmd.Process.Pid
			boot, start := identity(t, pid)
			e := Entry{Host: "local", PID: pid, PGID: pid, StartTime: start, BootID: boot, Exe: bin}
			tc.mangle(&e)
			path := filepath.Join(t.TempDir(), "out.csv.state")
			writeState(t, path, e)
			var said []string
			st, err := Open(context.Background(), path, []role.Target{local}, func(m string) { said = append(said, m) })
			if err != nil {
				t.Fatal(err)
			}
			if got := !alive(cmd); got != tc.wantKill {
				t.Fatalf("killed %v, want %v (messages %v)", got, tc.wantKill, said)
			}
			if tc.wantKill && (len(said) != 1 || !strings.Contains(said[0], "killed leftover node pid "+strconv.Itoa(pid))) {
				t.Fatalf("messages: %v", said)
			}
			// Either way the entry is settled: the file is gone.
			if _, err := os.Stat(path); !os.IsNotExist(err) || len(st.entries) != 0 {
				t.Fatalf("state left: %v, %d entries", err, len(st.entries))
			}
		})
	}
}

// openLocal opens the state file at path for one target on this machine,
// labelled label.
func openLocal(t *testing.T, path, label string) (*Record, role.Target) {
	t.Helper()
	local := role.Target{Host: remote.Local{}, Label: label, NodePath: "/bin/node"}
	st, err := Open(context.Background(), path, []role.Target{local}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	return st, local
}

func TestStateKeepsOtherHostsAndRecordsNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.state")
	other := Entry{Host: "alice@10.9.9.9:22", PID: 42, PGID: 42, StartTime: "1", BootID: "b", Exe: "/x/node"}
	writeState(t, path, other)
	st, local := openLocal(t, path, "server (local)")
	started := &results.Started{PID: 7, PGID: 7, StartTime: "99", BootID: "boot"}
	st.Add(local, started)
	var got []Entry
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &got)
	if len(got) != 2 || got[0] != other || got[1].PID != 7 || got[1].Exe != "/bin/node" || got[1].Host != "local" {
		t.Fatalf("state: %s", b)
	}
	st.Remove(local, started)
	st.Flush()
	b, _ = os.ReadFile(path)
	json.Unmarshal(b, &got)
	if len(got) != 1 || got[0] != other {
		t.Fatalf("after remove: %s", b)
	}
}

// A pool agent runs one command after another, each reporting the agent's
// own process: the file already holds it when the next command starts,
// and that start costs no write. Flush, at the exec's end, removes the
// file once every node has ended.
func TestStateAgentCommandsShareOneWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.state")
	st, local := openLocal(t, path, "client (local)")
	agent := &results.Started{PID: 9, PGID: 9, StartTime: "42", BootID: "boot"}
	// Each write is a new file, renamed over the last: its change time
	// (nanoseconds) is the write's.
	written := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("state file: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Ctim.Nano()
	}
	st.Add(local, agent)
	first := written()
	for range 5 {
		time.Sleep(2 * time.Millisecond)
		st.Remove(local, agent)
		st.Add(local, agent)
	}
	if written() != first {
		t.Errorf("the agent's later commands rewrote the state file")
	}
	st.Remove(local, agent)
	st.Flush()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("state file after the last node ended and a flush: %v", err)
	}
}

// Nodes started at once, as a pairwise round starts them, share writes of
// the state file, and each Add still returns only once the file holds its
// node: a runner killed right after must leave it there to be reaped.
func TestStateConcurrentAddsEachWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv.state")
	st, local := openLocal(t, path, "server (local)")
	const n = 64
	var wg sync.WaitGroup
	missing := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid := 1000 + i
			st.Add(local, &results.Started{PID: pid, PGID: pid, StartTime: "1", BootID: "b"})
			var got []Entry
			b, _ := os.ReadFile(path)
			json.Unmarshal(b, &got)
			if !slices.ContainsFunc(got, func(e Entry) bool { return e.PID == pid }) {
				missing <- pid
			}
		}()
	}
	wg.Wait()
	close(missing)
	for pid := range missing {
		t.Errorf("Add of pid %d returned before the file held it", pid)
	}
	for i := range n {
		pid := 1000 + i
		st.Remove(local, &results.Started{PID: pid})
	}
	st.Flush()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("state file after every node was removed: %v", err)
	}
}

// guardedLocal is this machine, whose kill(1) of a process group runs only
// for the groups a test allows, and is recorded either way: a reap that
// signalled group 1 as root would kill every process on the machine, the
// test's own included.
type guardedLocal struct {
	remote.Local
	allow map[int]bool

	mu     sync.Mutex
	groups []int // every group a kill was asked for
}

func (g *guardedLocal) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 4 && argv[0] == "kill" && argv[2] == "--" && strings.HasPrefix(argv[3], "-") {
		pgid, _ := strconv.Atoi(argv[3][1:])
		g.mu.Lock()
		g.groups = append(g.groups, pgid)
		g.mu.Unlock()
		if !g.allow[pgid] {
			return nil, nil // said to have worked, never run
		}
	}
	return g.Local.Run(ctx, argv)
}

func TestReapSignalsOnlyTheProcessOwnGroup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pgid      func(self, other int) int // the group the state file records
		wantGroup bool
	}{
		{"its own group", func(self, other int) int { return self }, true},
		{"group 1", func(self, other int) int { return 1 }, false},
		{"another process's group", func(self, other int) int { return other }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, bin := sleeper(t)
			other, _ := sleeper(t) // a bystander in a group of its own
			pid := cmd.Process.Pid
			boot, start := identity(t, pid)
			pgid := tc.pgid(pid, other.Process.Pid)
			path := filepath.Join(t.TempDir(), "out.csv.state")
			writeState(t, path, Entry{Host: "local", PID: pid, PGID: pgid, StartTime: start, BootID: boot, Exe: bin})
			host := &guardedLocal{allow: map[int]bool{pid: true, other.Process.Pid: true}}
			target := role.Target{Host: host, Label: "server (local)"}
			var said []string
			if _, err := Open(context.Background(), path, []role.Target{target}, func(m string) { said = append(said, m) }); err != nil {
				t.Fatal(err)
			}
			if alive(cmd) {
				t.Fatalf("the leftover node itself was not killed (messages %v)", said)
			}
			if !alive(other) {
				t.Fatal("a process of another group was killed")
			}
			signalled := len(host.groups) > 0
			if signalled != tc.wantGroup || (signalled && host.groups[0] != pid) {
				t.Fatalf("groups signalled: %v, want only the node's own (%d) when it is the recorded one", host.groups, pid)
			}
			warned := slices.ContainsFunc(said, func(m string) bool {
				return strings.Contains(m, "killing the pid alone") && strings.Contains(m, strconv.Itoa(pgid))
			})
			if warned == tc.wantGroup {
				t.Fatalf("warning about the group: %v, want %v (messages %v)", warned, !tc.wantGroup, said)
			}
		})
	}
}
