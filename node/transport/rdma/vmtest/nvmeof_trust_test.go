package vmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/nvmeof"
	"rdmasweep/testbed/guest"
)

// TestGuestWireAuth boots the wire's two guests on the 7.x kernel
// (trixie-backports), whose nvmet and initiator have DH-HMAC-CHAP
// (CONFIG_NVME_TARGET_AUTH, CONFIG_NVME_HOST_AUTH; Debian's 6.1 has
// neither, so TestGuestWire's nvmeof points run without it), and holds an
// nvmeof point to issue 42: runner check says both kernels have it; while
// the point reads, nothing secret is in argv or readable by another user,
// a host that claims the right host NQN without the key (or with another
// key) is refused, a swap of the data file's path changes nothing the
// kernel exports, and a stranger's "done" ends nothing; then the runner is
// killed with SIGKILL, and within 10 s neither guest has anything of the
// point left. A second point forces the adverse order of that end (the
// target gone before the client's node deletes its controller;
// targetFirst).
func TestGuestWireAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	lab := startWireLab(t, ctx, guest.TrixieBackports)
	plan := lab.plan(t, "wire-nvmeof-trust", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, duration: 300s}
sweep:
  matrix:
    workload: [nvmeof]
`, nvmeofFile, nvmeofSize>>20))
	slowGuests(t, plan)
	t.Run("Check", func(t *testing.T) { lab.nvmeofCheckAuth(t, plan) })
	t.Run("Point", func(t *testing.T) { lab.nvmeofTrust(t, plan) })
	t.Run("TargetFirst", func(t *testing.T) { lab.targetFirst(t, plan) })
	t.Logf("TestGuestWireAuth: %s from the start of the image check to the end", time.Since(start).Round(time.Second))
}

// slowGuests gives the plan's SSH a minute to connect, and its point 10
// minutes (node's deadline is 30 s more), so the point outlasts the checks
// made while it reads: the two guests under TCG on a busy machine are slow.
func slowGuests(t *testing.T, plan string) {
	b, err := os.ReadFile(plan)
	if err == nil {
		r := strings.NewReplacer("connect_timeout: 10s", "connect_timeout: 60s", "point: 3m}", "point: 10m}")
		err = os.WriteFile(plan, []byte(r.Replace(string(b))), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// nvmeofCheckAuth: runner check's NVMEOF cell says DH-HMAC-CHAP on both
// rows of the 7.x guests.
func (l *wireLab) nvmeofCheckAuth(t *testing.T, plan string) {
	out, errOut, err := runRunner(l.ctx, l.runner, l.dir, l.env, "check", "--set", "transport=tcp", plan)
	t.Logf("runner check: %v\n%s%s", err, out, errOut)
	var rows int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "server ") || strings.HasPrefix(line, "client ") {
			rows++
			if !strings.Contains(line, "DH-HMAC-CHAP") || strings.Contains(line, "no DH-HMAC-CHAP") {
				t.Errorf("check row %q: want its NVMEOF cell to say DH-HMAC-CHAP", line)
			}
		}
	}
	if rows != 2 {
		t.Errorf("runner check printed %d rows, want the server's and the client's", rows)
	}
}

// trustPoint is what the test reads of a running nvmeof point: its NQNs
// (from the server's configfs, where any local user sees them) and the
// client's controller.
type trustPoint struct {
	nqn, hostNQN, ctrl string
}

// awaitPoint waits until the point's target is made, its controller
// connected and fio reading, and returns what it found; a runner that
// exits first fails the test.
func (l *wireLab) awaitPoint(t *testing.T, exited <-chan error, stderr *consoleLog) trustPoint {
	t.Helper()
	var p trustPoint
	for start := time.Now(); ; time.Sleep(time.Second) {
		select {
		case err := <-exited:
			t.Fatalf("the runner exited (%v) before the point read (%+v)\n%s", err, p, stderr.String())
		default:
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("no nvmeof point reading after 5 minutes (%+v)\n%s", p, stderr.String())
		}
		p.nqn = strings.TrimSpace(l.server.sh(t, "ls /sys/kernel/config/nvmet/subsystems 2>/dev/null | grep rdmasweep || true"))
		p.hostNQN = strings.TrimSpace(l.server.sh(t, "ls /sys/kernel/config/nvmet/hosts 2>/dev/null | grep rdmasweep || true"))
		if p.nqn == "" || p.hostNQN == "" {
			continue
		}
		p.ctrl = strings.TrimSpace(l.client.sh(t, "for c in /sys/class/nvme/nvme*; do grep -qx '"+p.nqn+"' $c/subsysnqn 2>/dev/null && basename $c; done; true"))
		if p.ctrl != "" && strings.Contains(l.client.sh(t, procComms), "fio\n") {
			return p
		}
	}
}

// nvmeofTrust runs the point, holds it to each rule while fio reads, then
// kills the runner.
func (l *wireLab) nvmeofTrust(t *testing.T, plan string) {
	cmd, exited, stderr := l.startExec(t, plan)
	p := l.awaitPoint(t, exited, stderr)
	t.Logf("point reading: subsystem %s, host %s, controller %s", p.nqn, p.hostNQN, p.ctrl)
	t.Run("NothingSecretShown", func(t *testing.T) { l.nothingShown(t, p) })
	t.Run("RefusedWithoutKey", func(t *testing.T) { l.refusedWithoutKey(t, p) })
	t.Run("SwapChangesNothing", func(t *testing.T) { l.swapChangesNothing(t, p) })
	t.Run("DoneFromAStranger", func(t *testing.T) { l.doneFromAStranger(t, p) })
	t.Run("KillRunner", func(t *testing.T) { l.killRunner(t, cmd, exited, stderr) })
}

// startExec starts runner exec of plan over tcp; the test's end kills it.
func (l *wireLab) startExec(t *testing.T, plan string) (*exec.Cmd, <-chan error, *consoleLog) {
	cmd := exec.CommandContext(l.ctx, l.runner, "exec", "--set", "transport=tcp", plan)
	cmd.Dir, cmd.Env = l.dir, l.env
	stderr := &consoleLog{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited, stderr
}

// procComms and procArgs print every process's name, and its argv, a
// line each, from /proc (busybox's ps and procps's differ).
const (
	procComms = "cat /proc/[0-9]*/comm 2>/dev/null; true"
	procArgs  = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done; true"
)

// asNobody runs a shell command in a guest as uid and gid 65534 with no
// capabilities, as another local user would, and returns its output.
const asNobody = "capsh --drop=all --gid=65534 --uid=65534 --shell=/bin/sh -- -c "

// nothingShown: neither guest's process list names an NQN or a key, and
// another local user reads the key neither from the target's configfs nor
// from the client's controller in sysfs (root can, and finds it there).
func (l *wireLab) nothingShown(t *testing.T, p trustPoint) {
	for _, e := range []*wireEnd{l.server, l.client} {
		if ps := e.sh(t, procArgs); strings.Contains(ps, "nqn.") || strings.Contains(ps, "DHHC") {
			t.Errorf("a process's argv names an NQN or a key:\n%s", ps)
		}
	}
	for _, c := range []struct {
		e    *wireEnd
		file string
	}{{l.server, "/sys/kernel/config/nvmet/hosts/" + p.hostNQN + "/dhchap_key"}, {l.client, "/sys/class/nvme/" + p.ctrl + "/dhchap_secret"}} {
		if root := c.e.sh(t, "cat "+c.file); !strings.HasPrefix(root, "DHHC-1:") {
			t.Errorf("root reads %s as %q; want the point's DHHC-1 key there", c.file, root)
		}
		out := c.e.sh(t, asNobody+"'cat "+c.file+" 2>&1; echo rc=$?'")
		if !strings.Contains(out, "Permission denied") || strings.Contains(out, "DHHC") {
			t.Errorf("another user reading %s: %q; want permission denied", c.file, out)
		}
	}
}

// refusedWithoutKey: the client guest, a host on the data network,
// connects claiming the point's host NQN and host ID (from its sysfs)
// with no key, then with another point's key: the kernel refuses both,
// and the point's one controller is all that is connected to the
// subsystem. The same connect with the point's key (root reads it on the
// server) is admitted, so it is the key that was missing; that
// controller is deleted again.
func (l *wireLab) refusedWithoutKey(t *testing.T, p trustPoint) {
	hostID := strings.TrimSpace(l.client.sh(t, "cat /sys/class/nvme/"+p.ctrl+"/hostid"))
	base := fmt.Sprintf("transport=tcp,traddr=%s,trsvcid=4420,nqn=%s,hostnqn=%s,hostid=%s,duplicate_connect", wireServerIP, p.nqn, p.hostNQN, hostID)
	connect := func(opts string) string {
		return l.client.sh(t, "echo '"+opts+"' > /dev/nvme-fabrics 2>&1; echo rc=$?")
	}
	count := func() string {
		return strings.TrimSpace(l.client.sh(t, "grep -lx '"+p.nqn+"' /sys/class/nvme/*/subsysnqn | wc -l"))
	}
	for _, opts := range []string{base, base + ",dhchap_secret=" + nvmeof.Key([]byte("not the point's secret"))} {
		if out := connect(opts); strings.Contains(out, "rc=0") {
			t.Errorf("connect %s: %q; want it refused", opts, out)
		}
	}
	if n := count(); n != "1" {
		t.Errorf("%s controllers of the subsystem on the client, want the point's 1", n)
	}
	key := strings.TrimSpace(l.server.sh(t, "cat /sys/kernel/config/nvmet/hosts/"+p.hostNQN+"/dhchap_key"))
	if out := connect(base + ",dhchap_secret=" + key); !strings.Contains(out, "rc=0") || count() != "2" {
		t.Errorf("connect with the point's key: %q, %s controllers; want it admitted beside the point's", out, count())
	}
	t.Logf("the server's kernel: %s", strings.TrimSpace(l.server.sh(t, "dmesg | grep -i nvmet | tail -5; true")))
	l.client.sh(t, "for c in /sys/class/nvme/nvme*; do [ ${c##*/} = "+p.ctrl+" ] || ! grep -qx '"+p.nqn+"' $c/subsysnqn || echo 1 > $c/delete_controller; done; true")
}

// deviceRE is the only device_path node nvmet gives the kernel: the
// descriptor of the file it checked and holds open.
var deviceRE = regexp.MustCompile(`^/proc/\d+/fd/\d+$`)

// swapChangesNothing: the data file's path is moved away and a link to
// /etc/shadow put in its place, as another user who can write the data
// directory could; the path the kernel opens the namespace by still
// names the file node checked (same device and inode, same bytes), and
// the client still reads the file's first block through the namespace.
// The file is put back after.
func (l *wireLab) swapChangesNothing(t *testing.T, p trustPoint) {
	ns := "/sys/kernel/config/nvmet/subsystems/" + p.nqn + "/namespaces/1"
	dp := strings.TrimSpace(l.server.sh(t, "cat "+ns+"/device_path"))
	if !deviceRE.MatchString(dp) {
		t.Fatalf("device_path %q; want /proc/PID/fd/N of node's descriptor", dp)
	}
	before := l.server.sh(t, "stat -L -c '%d:%i' "+dp+" "+nvmeofFile)
	l.server.sh(t, fmt.Sprintf("mv %s %s.orig && ln -s /etc/shadow %s", nvmeofFile, nvmeofFile, nvmeofFile))
	defer l.server.sh(t, fmt.Sprintf("rm -f %s && mv %s.orig %s", nvmeofFile, nvmeofFile, nvmeofFile))
	after := l.server.sh(t, fmt.Sprintf("stat -L -c '%%d:%%i' %s %s.orig /etc/shadow; cmp %s %s.orig && echo same", dp, nvmeofFile, dp, nvmeofFile))
	f, b := strings.Fields(after), strings.Fields(before)
	t.Logf("device_path %s; before the swap %v (device_path, the file); after %v (device_path, the moved file, /etc/shadow)", dp, b, f)
	if len(b) != 2 || b[0] != b[1] || len(f) != 4 || f[0] != b[0] || f[0] != f[1] || f[0] == f[2] || f[3] != "same" {
		t.Errorf("after the swap device_path resolves to %v; want the file node checked (%v), not /etc/shadow", f, b)
	}
	// nvmeXnY, not a path's hidden nvmeXcZnY
	dev := strings.TrimSpace(l.client.sh(t, "for d in /sys/block/nvme*n1; do case ${d##*/} in *c*) continue; esac; grep -qx '"+p.nqn+"' $d/device/subsysnqn 2>/dev/null && echo /dev/${d##*/}; done; true"))
	got := l.client.sh(t, "dd if="+dev+" bs=65536 count=1 iflag=direct 2>/dev/null | md5sum")
	want := l.server.sh(t, "head -c 65536 "+nvmeofFile+".orig | md5sum")
	if dev == "" || got != want {
		t.Errorf("the client reads %q from %q's first 64 KiB; want the checked file's %q", got, dev, want)
	}
	if ro := strings.TrimSpace(l.client.sh(t, "cat /sys/block/"+strings.TrimPrefix(dev, "/dev/")+"/ro")); ro != "1" {
		t.Errorf("%s read-only: %q; want 1 (BLKROSET)", dev, ro)
	}
}

// doneFromAStranger: the client guest, as a stranger, sends node nvmet's
// done port the old plain "done HOSTNQN", then 32 bytes of garbage as an
// answer; the target stays, and node nvmet runs on.
func (l *wireLab) doneFromAStranger(t *testing.T, p trustPoint) {
	out := l.client.sh(t, fmt.Sprintf("printf 'done %s' | busybox nc -w 2 %s 4421 | wc -c; head -c 32 /dev/urandom | busybox nc -w 2 %s 4421 | wc -c; true",
		p.hostNQN, wireServerIP, wireServerIP))
	t.Logf("bytes the done port sent each stranger (its challenge): %s", strings.Join(strings.Fields(out), ", "))
	time.Sleep(2 * time.Second)
	if left := l.server.sh(t, "ls /sys/kernel/config/nvmet/subsystems"); !strings.Contains(left, p.nqn) {
		t.Errorf("after a stranger's done the subsystem is gone: %q", left)
	}
	if !strings.Contains(l.server.sh(t, procArgs), " nvmet ") {
		t.Errorf("after a stranger's done node nvmet no longer runs")
	}
}

// killRunner: the runner is killed (SIGKILL, so it tears nothing down
// itself); within 10 s neither guest has a subsystem, namespace, port,
// host entry or record of ours, nor a fabric controller, fio or node.
func (l *wireLab) killRunner(t *testing.T, cmd *exec.Cmd, exited <-chan error, stderr *consoleLog) {
	select {
	case err := <-exited:
		t.Fatalf("the runner exited (%v) before it was killed\n%s", err, stderr.String())
	default:
	}
	cmd.Process.Kill()
	<-exited
	l.noneLeftWithin(t, "the runner's kill", 10*time.Second, stderr, l.server, l.client)
}

// leftOfOurs lists, in a guest, what of a point is left: nvmet's
// subsystems, ports and host entries, node's records, a fabric (not
// pcie) controller, fio, and node.
const leftOfOurs = `find /sys/kernel/config/nvmet/subsystems /sys/kernel/config/nvmet/ports /sys/kernel/config/nvmet/hosts /run/rdmasweep/nvmeof -mindepth 1 -maxdepth 1 2>/dev/null
grep -L '^pcie$' /sys/class/nvme/*/transport 2>/dev/null
grep -x fio /proc/[0-9]*/comm 2>/dev/null
ls -l /proc/[0-9]*/exe 2>/dev/null | grep ` + remoteNode + `; true`

// noneLeftWithin waits up to limit from now (just after what) for nothing
// of ours to be left on each of ends, and fails the test when something
// is, printing why (leftDiagnosis). Either way it logs each guest's
// kernel lines about nvme, placed by its clock at the start.
func (l *wireLab) noneLeftWithin(t *testing.T, what string, limit time.Duration, stderr *consoleLog, ends ...*wireEnd) {
	t.Helper()
	start := time.Now()
	at := make([]string, len(ends))
	for i, e := range ends {
		at[i] = strings.TrimSpace(e.sh(t, "cut -d' ' -f1 /proc/uptime"))
	}
	defer func() {
		for i, e := range ends {
			t.Logf("%s's kernel (its clock read %s s just after %s):\n%s", l.name(e), at[i], what, e.sh(t, "dmesg | grep -iE 'nvme|blocked' | tail -12; true"))
		}
	}()
	for {
		var left []string
		for _, e := range ends {
			if s := strings.TrimSpace(e.sh(t, leftOfOurs)); s != "" {
				left = append(left, l.name(e)+": "+s)
			}
		}
		if len(left) == 0 {
			t.Logf("nothing left %s after %s", time.Since(start).Round(100*time.Millisecond), what)
			return
		}
		if time.Since(start) > limit {
			t.Errorf("%s after %s: %q; want nothing\nrunner:\n%s", limit, what, left, lastLines(stderr.String(), 20))
			for _, e := range ends {
				t.Logf("%s, %s after %s:\n%s", l.name(e), limit, what, e.sh(t, leftDiagnosis))
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// name is e's role in the lab.
func (l *wireLab) name(e *wireEnd) string {
	if e == l.server {
		return "the server"
	}
	return "the client"
}

// targetFirst forces the adverse order of a runner's end: the client's
// node nvmeof-read is stopped (SIGSTOP) while its point reads, the runner
// is killed, and node nvmet, hearing no done from the client, removes the
// target after its grace, so the client's controller is left
// reconnecting to a target that is gone, with no node to delete it.
// Within 10 s of the target's end the client's kernel has removed that
// controller itself (ctrl_loss_tmo). Then the client's node runs on
// (SIGCONT), and within 10 s nothing of the point is left on the client.
func (l *wireLab) targetFirst(t *testing.T, plan string) {
	cmd, exited, stderr := l.startExec(t, plan)
	l.awaitPoint(t, exited, stderr)
	pid := strings.TrimSpace(l.client.sh(t, "sed -n 's/.*\"pid\":\\([0-9]*\\).*/\\1/p' /run/rdmasweep/nvmeof/host-*.json"))
	if pid == "" {
		t.Fatalf("no record of node nvmeof-read's on the client:\n%s", l.client.sh(t, "ls -l /run/rdmasweep/nvmeof; true"))
	}
	l.client.sh(t, "kill -STOP "+pid)
	defer l.client.sh(t, "kill -CONT "+pid+" 2>/dev/null; true")
	cmd.Process.Kill()
	<-exited
	for start := time.Now(); strings.TrimSpace(l.server.sh(t, leftOfOurs)) != ""; time.Sleep(500 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the server's target is still there 30 s after the runner's kill:\n%s", l.server.sh(t, leftOfOurs))
		}
	}
	const ctrls = "for c in /sys/class/nvme/nvme*; do [ -e $c ] && [ \"$(cat $c/transport 2>/dev/null)\" != pcie ] && echo ${c##*/} $(cat $c/state 2>/dev/null); done; true"
	gone := time.Now()
	t.Logf("the target is gone; the client's fabric controllers: %s", strings.TrimSpace(l.client.sh(t, ctrls)))
	for c := ""; ; time.Sleep(500 * time.Millisecond) {
		if c = strings.TrimSpace(l.client.sh(t, ctrls)); c == "" {
			t.Logf("the client's kernel removed the controller itself %s after the test saw the target gone", time.Since(gone).Round(100*time.Millisecond))
			break
		}
		if time.Since(gone) > 10*time.Second {
			t.Errorf("10 s after its target went, with node stopped, the client's controller is still there (%s); want the kernel to have removed it (ctrl_loss_tmo)\n%s",
				c, l.client.sh(t, leftDiagnosis))
			break
		}
	}
	l.client.sh(t, "kill -CONT "+pid)
	l.noneLeftWithin(t, "node nvmeof-read's SIGCONT", 10*time.Second, stderr, l.client)
}

// leftDiagnosis prints, in a guest, what a failed noneLeftWithin needs to
// say why something stayed: each fio and node process left (its argv,
// state, wait channel and kernel stack; the guests run as root), each
// fabric controller's state, and the kernel's last nvme lines.
const leftDiagnosis = `for d in /proc/[0-9]*; do
  c=$(cat $d/comm 2>/dev/null); e=$(readlink $d/exe 2>/dev/null)
  [ "$c" = fio ] || [ "$e" = ` + remoteNode + ` ] || continue
  echo "== pid ${d#/proc/} ($c): $(tr '\0' ' ' < $d/cmdline 2>/dev/null)"
  grep -E '^(State|PPid):' $d/status 2>/dev/null | tr '\n' ' '; echo "wchan $(cat $d/wchan 2>/dev/null)"
  for k in $d/task/*; do echo "-- task ${k##*/} $(grep '^State:' $k/status 2>/dev/null) wchan $(cat $k/wchan 2>/dev/null)"; cat $k/stack 2>/dev/null; done
done
for c in /sys/class/nvme/nvme*; do
  [ "$(cat $c/transport 2>/dev/null)" = pcie ] && continue
  echo "== controller ${c##*/}: state $(cat $c/state 2>/dev/null), transport $(cat $c/transport 2>/dev/null), ctrl_loss_tmo $(cat $c/ctrl_loss_tmo 2>/dev/null), reconnect_delay $(cat $c/reconnect_delay 2>/dev/null), fast_io_fail_tmo $(cat $c/fast_io_fail_tmo 2>/dev/null)"
done
echo "== records"; ls -l /run/rdmasweep/nvmeof 2>/dev/null
echo "== dmesg"; dmesg | grep -iE 'nvme|blocked|hung' | tail -30; true`
