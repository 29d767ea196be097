//go:build rdmaguest

package guest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
	"rdmasweep/runner/points/preflight"
)

// underMemlock64 starts node with args as root with `ulimit -l 64`, and
// with dropCaps without CAP_IPC_LOCK and CAP_SYS_RESOURCE in its bounding
// set: what a login into a container with Docker's default capabilities
// gets. The bounding set is dropped on a locked thread that forks the
// child and is never unlocked, so the rest of the test keeps its own.
func underMemlock64(t *testing.T, dropCaps bool, args ...string) *proc {
	t.Helper()
	return underMemlock(t, 64, dropCaps, args...)
}

// underMemlock is underMemlock64 with `ulimit -l kib`.
func underMemlock(t *testing.T, kib int, dropCaps bool, args ...string) *proc {
	t.Helper()
	shArgs := append([]string{"-c", fmt.Sprintf(`ulimit -l %d && exec "$0" "$@"`, kib), nodeBin(t)}, args...)
	if !dropCaps {
		return launch(t, "", nil, "/bin/sh", shArgs...)
	}
	started := make(chan *proc)
	go func() {
		runtime.LockOSThread() // the thread exits with its reduced bounding set
		for _, c := range []uintptr{unix.CAP_IPC_LOCK, unix.CAP_SYS_RESOURCE} {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
				t.Errorf("drop capability %d from the bounding set: %v", c, err)
			}
		}
		started <- launch(t, "", nil, "/bin/sh", shArgs...)
	}()
	return <-started
}

// TestMemlockWithoutCaps: as root, with `ulimit -l 64`, without
// CAP_IPC_LOCK and CAP_SYS_RESOURCE, check's memory judgement fails naming
// the capability and the container case, and node serve refuses a pinned
// region before registering it. With the capabilities back, both pass:
// node raises the limit itself.
func TestMemlockWithoutCaps(t *testing.T) {
	need := preflight.Need{Role: "server", Transport: "rdma", Pinned: true, FileSize: 1 << 20}
	for _, drop := range []bool{true, false} {
		name := map[bool]string{true: "without", false: "with"}[drop]
		t.Run(name, func(t *testing.T) {
			h := nodeHost(t, drop)
			if h.CapIPCLock == drop || h.MemlockBytes != 64<<10 {
				t.Fatalf("node host: cap_ipc_lock %v, cap_sys_resource %v, memlock %d; want the capabilities %s, 64 KiB", h.CapIPCLock, h.CapSysResource, h.MemlockBytes, name)
			}
			v := preflight.Judge(preflight.Facts{UID: 0, Memlock: "64", Host: h}, need)
			var memory []string
			for _, p := range v.Problems {
				if p.Check == "memory" {
					memory = append(memory, p.Msg+"; hint: "+p.Hint)
				}
			}
			msg := strings.Join(memory, " | ")
			srv := underMemlock64(t, drop, serveArgs(t, "1MiB")...)
			if drop {
				if !strings.Contains(msg, "CAP_IPC_LOCK") || !strings.Contains(msg, "--cap-add IPC_LOCK") {
					t.Errorf("check's memory cell %q: want a failure naming CAP_IPC_LOCK and --cap-add IPC_LOCK", msg)
				}
				got := failure(t, srv)
				if !strings.Contains(got, "CAP_IPC_LOCK") || strings.Contains(got, "ibv_reg_mr") {
					t.Errorf("serve: %q; want a refusal naming CAP_IPC_LOCK, before ibv_reg_mr", got)
				}
				t.Logf("serve refused: %s", got)
				return
			}
			if msg != "" {
				t.Errorf("with the capabilities, check's memory cell fails: %s", msg)
			}
			until[results.Ready](t, srv, "ready")
		})
	}
}

// nodeHost runs node host --json under memlock 64 KiB, with or without
// the capabilities.
func nodeHost(t *testing.T, dropCaps bool) *results.Host {
	t.Helper()
	shArgs := []string{"-c", `ulimit -l 64 && exec "$0" host --json`, nodeBin(t)}
	out := make(chan []byte, 1)
	run := func() {
		b, err := exec.Command("/bin/sh", shArgs...).Output()
		if err != nil {
			t.Errorf("node host: %v", err)
		}
		out <- b
	}
	if dropCaps {
		go func() {
			runtime.LockOSThread()
			for _, c := range []uintptr{unix.CAP_IPC_LOCK, unix.CAP_SYS_RESOURCE} {
				if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
					t.Errorf("drop capability %d: %v", c, err)
				}
			}
			run()
		}()
	} else {
		run()
	}
	var h results.Host
	if err := json.Unmarshal(<-out, &h); err != nil {
		t.Fatalf("node host --json: %v", err)
	}
	return &h
}
