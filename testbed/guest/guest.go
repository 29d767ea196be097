package guest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// File is one file put into the guest for a boot.
type File struct {
	Data []byte // contents, or
	Host string // a host file to copy
	Mode os.FileMode
}

// Options describe one boot.
type Options struct {
	// Files maps absolute guest paths to files, e.g. "/vmtest/node".
	Files map[string]File
	// Run, when set, becomes /vmtest/run (a shell script): the guest runs it
	// after rxe0 and sshd are up, prints VMTEST RESULT PASS or FAIL by its
	// exit status, and powers off. Without it the guest stays up for ssh.
	Run string
	// Console receives the guest's serial console (nil: discarded).
	Console io.Writer
	// Log receives the harness's own progress (nil: discarded).
	Log io.Writer
	// CPUs and MemoryMB default to 2 and 2048.
	CPUs, MemoryMB int
	// Kernel is the guest kernel (zero: Bookworm).
	Kernel Kernel
	// OneNIC boots the guest with eth0 (rxe0) alone, without the second
	// and third NICs' networks.
	OneNIC bool
	// Wire, when set, joins the guest to another by a wire: a NIC of its
	// own on a qemu socket network, after the others. /init takes it for
	// any further NIC: with OneNIC it is eth1, and gets rxe1 and GuestIP1
	// as eth1 always does (the caller readdresses it); without, eth3, left
	// down.
	Wire *Wire
	// NVMe, when set, is a raw disk image (e.g. from NewExt4Image)
	// attached as qemu's emulated NVMe drive: nvme0n1 in the guest, once
	// the nvme module is loaded. It is opened with O_DIRECT on the host
	// (cache=none) where its file system takes that, so the host's page
	// cache does not serve the guest's cold reads.
	NVMe string
	// NVMeReadBPS, when above 0, throttles the NVMe drive's reads to that
	// many bytes a second (qemu's throttling.bps-read); writes are not.
	NVMeReadBPS int64
	// Forward forwards more TCP ports from the host's 127.0.0.1 into the
	// guest, host port to guest port (beside sshd's SSHPort to 22).
	Forward map[int]int
}

// Wire is one end of a point-to-point link between two guests: qemu's
// socket network, TCP on the host's loopback. The listening guest must be
// started first: qemu fails to start when its connect is refused.
type Wire struct {
	// Addr is the host address the link runs over, e.g. 127.0.0.1:40123.
	Addr string
	// Listen makes this guest the end that listens on Addr; the other
	// connects to it.
	Listen bool
	// MAC is the wire NIC's MAC address, which tells it from the others
	// in the guest (e.g. 52:54:00:00:09:01).
	MAC string
}

// args are qemu's arguments for the wire's NIC.
func (w Wire) args() []string {
	mode := "connect"
	if w.Listen {
		mode = "listen"
	}
	return []string{"-netdev", fmt.Sprintf("socket,id=w0,%s=%s", mode, w.Addr), "-device", "virtio-net-pci,netdev=w0,mac=" + w.MAC + NICSpeed}
}

// machine is how qemu emulates a guest architecture under TCG.
type machine struct {
	qemu, pkg string   // the emulator and the Debian package providing it
	args      []string // machine and CPU
	console   string   // the serial console the kernel writes to
	// append is what the kernel's command line adds for this machine.
	append string
}

var machines = map[string]machine{
	"amd64": {qemu: "qemu-system-x86_64", pkg: "qemu-system-x86", args: []string{"-accel", "tcg", "-cpu", "max"}, console: "ttyS0",
		// no_timer_check: under TCG on a busy host the kernel's check of
		// the IO-APIC timer can miss its ticks and panic at boot ("IO-APIC +
		// timer doesn't work"), seen here with the machine loaded.
		// tsc=reliable: the clocksource watchdog, its HPET reads slowed
		// by a loaded host, called the TSC skewed 104 s into a 7.3
		// guest's suite, and the clocksource switch it started, patched
		// into running code under TCG, oopsed in sched_clock_cpu and
		// panicked the guest. TCG's TSC follows the host's clock.
		append: " no_timer_check tsc=reliable"},
	// cortex-a57 (ARMv8.0, Go's arm64 baseline): with -cpu max the guest
	// took 39-41 s to boot here against 14-16 s, most of it TCG emulating
	// pointer authentication exactly (max,pauth-impdef=on took 14 s).
	"arm64": {qemu: "qemu-system-aarch64", pkg: "qemu-system-arm", args: []string{"-accel", "tcg", "-M", "virt", "-cpu", "cortex-a57"}, console: "ttyAMA0"},
}

// Guest is a running qemu guest.
type Guest struct {
	// SSHPort is the host port on 127.0.0.1 forwarded to the guest's sshd.
	SSHPort int
	// User is the account the key logs in as ("root").
	User string
	// Signer logs in as User; KeyPath is the same key as an OpenSSH private
	// key file (removed by Stop), for tools that want a path.
	Signer  ssh.Signer
	KeyPath string
	// HostKey is the guest sshd's host key, for known_hosts.
	HostKey ssh.PublicKey
	// Image is what the guest booted: its kernel and release.
	Image *Image

	cmd     *exec.Cmd
	tmp     string
	exited  chan struct{}
	waitErr error

	mu      sync.Mutex
	ready   chan struct{}
	result  chan string // the VMTEST RESULT line
	console strings.Builder
}

// Boot starts the guest and returns once it printed VMTEST READY and, when
// there is no Options.Run script, its sshd answers on SSHPort. Cancelling ctx during Boot stops the guest; after
// Boot returns, only Stop does.
func Boot(ctx context.Context, o Options) (*Guest, error) {
	o.defaults()
	mach, ok := machines[o.Kernel.arch()]
	if !ok {
		return nil, fmt.Errorf("boot guest: no machine for %s", o.Kernel.arch())
	}
	qemu, err := exec.LookPath(mach.qemu)
	if err != nil {
		return nil, fmt.Errorf("boot guest: %w (apt-get install %s)", err, mach.pkg)
	}
	im, err := EnsureImage(ctx, o.Kernel, o.Log)
	if err != nil {
		return nil, err
	}
	g := &Guest{User: "root", HostKey: im.HostKey, Image: im, exited: make(chan struct{}), ready: make(chan struct{}), result: make(chan string, 1)}
	g.tmp, err = os.MkdirTemp("", "vmtest-boot-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Guest, error) {
		g.Stop()
		return nil, err
	}
	if err := g.newKey(); err != nil {
		return fail(err)
	}
	initrd, err := g.writeInitrd(o)
	if err != nil {
		return fail(err)
	}
	g.SSHPort, err = freePort()
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	args := append(qemuArgs(mach, o, im, initrd, g.SSHPort), "-qmp", "unix:"+g.qmpPath()+",server=on,wait=off")
	if err := g.startQemu(qemu, args, o); err != nil {
		return fail(err)
	}
	if err := g.awaitReady(ctx); err != nil {
		return fail(err)
	}
	fmt.Fprintf(o.Log, "vmtest: guest ready after %s\n", time.Since(start).Round(100*time.Millisecond))
	if o.Run != "" {
		return g, nil // the script may be done before sshd would be asked
	}
	if err := g.waitSSH(ctx); err != nil {
		return fail(err)
	}
	fmt.Fprintf(o.Log, "vmtest: sshd on 127.0.0.1:%d after %s\n", g.SSHPort, time.Since(start).Round(100*time.Millisecond))
	return g, nil
}

// defaults fills what o leaves zero.
func (o *Options) defaults() {
	if o.Console == nil {
		o.Console = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 2048
	}
	if o.Kernel.Name == "" {
		o.Kernel = Bookworm
	}
}

// newKey makes the key the guest's root accepts, and writes it to KeyPath.
func (g *Guest) newKey() error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	g.Signer, err = ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "rdmasweep vmtest")
	if err != nil {
		return err
	}
	g.KeyPath = filepath.Join(g.tmp, "id_ed25519")
	return os.WriteFile(g.KeyPath, pem.EncodeToMemory(blk), 0o600)
}

// writeInitrd writes this boot's initrd: the run's files first,
// uncompressed, then the cached base. The kernel unpacks each archive of
// the concatenation in turn.
func (g *Guest) writeInitrd(o Options) (string, error) {
	files := map[string]File{"/root/.ssh/authorized_keys": {Data: ssh.MarshalAuthorizedKey(g.Signer.PublicKey()), Mode: 0o600}}
	for p, f := range o.Files {
		files[p] = f
	}
	if o.Run != "" {
		files["/vmtest/run"] = File{Data: []byte(o.Run), Mode: 0o755}
	}
	initrd := filepath.Join(g.tmp, "initrd")
	if err := writeInitrd(initrd, files, g.Image.Initramfs); err != nil {
		return "", fmt.Errorf("write initrd: %w", err)
	}
	return initrd, nil
}

// NICSpeed is what the guest's eth0, eth2 and wire NICs tell their
// driver of their speed: 10 Gb/s, so a device over one has a known line
// rate (1250 MB/s). eth1 is told none, and reads -1, so rxe1's is
// unknown.
const NICSpeed = ",speed=10000,duplex=full"

// qemuArgs are qemu's arguments for one boot: sshd forwarded from
// 127.0.0.1:sshPort, and, unless o.OneNIC, eth1 and eth2 on networks of
// their own, for rxe1 and siw0; then o.Wire's NIC and o.NVMe's drive.
func qemuArgs(mach machine, o Options, im *Image, initrd string, sshPort int) []string {
	args := append(append([]string{}, mach.args...),
		"-smp", fmt.Sprint(o.CPUs), "-m", fmt.Sprint(o.MemoryMB),
		"-kernel", im.Vmlinuz, "-initrd", initrd,
		"-append", "console="+mach.console+" rdinit=/init panic=-1 quiet loglevel=4"+mach.append,
		"-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot",
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22", sshPort)+extraForwards(o.Forward),
		"-device", "virtio-net-pci,netdev=n0"+NICSpeed,
	)
	if !o.OneNIC {
		args = append(args,
			"-netdev", "user,id=n1,net=10.0.3.0/24,restrict=on",
			"-device", "virtio-net-pci,netdev=n1",
			"-netdev", "user,id=n2,net=10.0.4.0/24,restrict=on",
			"-device", "virtio-net-pci,netdev=n2"+NICSpeed,
		)
	}
	if o.Wire != nil {
		args = append(args, o.Wire.args()...)
	}
	if o.NVMe != "" {
		drive := "file=" + o.NVMe + ",if=none,id=nv0,format=raw"
		if directIO(o.NVMe) {
			// The guest's reads reach the host's storage, not the host's
			// page cache, so a cold read in the guest is a disk's read.
			// Threads, not aio=native: beside two busy loops, a deep queue
			// of reads (the disk ceiling's) left native AIO requests that
			// never completed; the guest's driver timed them out, reset
			// the controller, and the drive completed nothing more.
			drive += ",cache=none,aio=threads"
		}
		if o.NVMeReadBPS > 0 {
			drive += fmt.Sprintf(",throttling.bps-read=%d", o.NVMeReadBPS)
		}
		args = append(args, "-drive", drive, "-device", "nvme,serial=rsnvme0,drive=nv0")
	}
	return args
}

// extraForwards is Options.Forward as hostfwd options of a user netdev.
func extraForwards(fwd map[int]int) string {
	var s string
	for _, h := range slices.Sorted(maps.Keys(fwd)) {
		s += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", h, fwd[h])
	}
	return s
}

// startQemu starts qemu and the goroutines that read its console and
// wait for it.
func (g *Guest) startQemu(qemu string, args []string, o Options) error {
	g.cmd = exec.Command(qemu, args...)
	// A test binary that dies without Stop (go test's -timeout panics)
	// takes its guest with it: an orphaned qemu keeps 2 GiB and a core.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	g.cmd.Stderr = o.Console
	fmt.Fprintf(o.Log, "vmtest: %s %s\n", qemu, strings.Join(args, " "))
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("start qemu: %w", err)
	}
	go g.readConsole(out, o.Console)
	go func() {
		g.waitErr = g.cmd.Wait()
		close(g.exited)
	}()
	return nil
}

// awaitReady waits for the guest's init to say it is ready.
func (g *Guest) awaitReady(ctx context.Context) error {
	select {
	case <-g.ready:
		return nil
	case r := <-g.result:
		g.result <- r
		return fmt.Errorf("guest did not come up: %s; console:\n%s", r, g.Console())
	case <-g.exited:
		return fmt.Errorf("qemu exited before the guest was ready (%v); console:\n%s", g.waitErr, g.Console())
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Guest) readConsole(r io.Reader, tee io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		fmt.Fprintln(tee, line)
		g.mu.Lock()
		g.console.WriteString(line + "\n")
		g.mu.Unlock()
		switch {
		case strings.HasPrefix(line, "VMTEST READY"):
			close(g.ready)
		case strings.HasPrefix(line, "VMTEST RESULT"):
			select {
			case g.result <- line:
			default:
			}
		}
	}
}

// Console returns everything the guest printed so far.
func (g *Guest) Console() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.console.String()
}

// waitSSH waits until the forwarded port answers with an SSH banner: qemu
// accepts on the host side before the guest's sshd listens.
func (g *Guest) waitSSH(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	addr := fmt.Sprintf("127.0.0.1:%d", g.SSHPort)
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			b := make([]byte, 4)
			_, err = io.ReadFull(c, b)
			c.Close()
			if err == nil && string(b) == "SSH-" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("guest sshd on %s did not answer within a minute: %v", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.exited:
			return fmt.Errorf("qemu exited while waiting for sshd; console:\n%s", g.Console())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Dial opens an SSH client to the guest.
func (g *Guest) Dial() (*ssh.Client, error) {
	return ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.SSHPort), &ssh.ClientConfig{
		User: g.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(g.Signer)},
		HostKeyCallback: ssh.FixedHostKey(g.HostKey), Timeout: 10 * time.Second,
	})
}

// KnownHostsLine returns a known_hosts line for the guest's forwarded port.
func (g *Guest) KnownHostsLine() string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", g.SSHPort, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(g.HostKey))))
}

// ErrFailed is wrapped by Wait when the guest's script failed.
var ErrFailed = errors.New("guest script failed")

// Wait waits for the guest's VMTEST RESULT line (boots with Options.Run)
// and for qemu to exit. It returns nil on PASS, an error wrapping ErrFailed
// on FAIL, and another error if the guest died without a verdict.
func (g *Guest) Wait(ctx context.Context) error {
	var line string
	select {
	case line = <-g.result:
	case <-g.exited:
		select {
		case line = <-g.result:
		default:
			return fmt.Errorf("qemu exited (%v) without a VMTEST RESULT line", g.waitErr)
		}
	case <-ctx.Done():
		g.Stop()
		return ctx.Err()
	}
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	g.Stop()
	if strings.HasPrefix(line, "VMTEST RESULT PASS") {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFailed, line)
}

// Stop kills qemu and removes the boot's files. It is safe to call more
// than once.
func (g *Guest) Stop() error {
	if g.cmd != nil && g.cmd.Process != nil {
		select {
		case <-g.exited:
		default:
			g.cmd.Process.Kill()
			<-g.exited
		}
	}
	if g.tmp != "" {
		os.RemoveAll(g.tmp)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeInitrd writes files as an uncompressed newc cpio, then appends base.
func writeInitrd(path string, files map[string]File, base string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &cpioWriter{w: bufio.NewWriter(f)}
	dirs := map[string]bool{}
	var paths []string
	for p := range files {
		paths = append(paths, p)
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var dl []string
	for d := range dirs {
		dl = append(dl, d)
	}
	sort.Strings(dl) // parents before children
	for _, d := range dl {
		mode := os.FileMode(0o755)
		if d == "/root" || d == "/root/.ssh" {
			mode = 0o700
		}
		if err := w.entry(strings.TrimPrefix(d, "/"), 0o040000|uint32(mode), nil); err != nil {
			return err
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		fl := files[p]
		data := fl.Data
		if fl.Host != "" {
			data, err = os.ReadFile(fl.Host)
			if err != nil {
				return err
			}
		}
		mode := fl.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := w.entry(strings.TrimPrefix(p, "/"), 0o100000|uint32(mode.Perm()), data); err != nil {
			return err
		}
	}
	if err := w.entry("TRAILER!!!", 0, nil); err != nil {
		return err
	}
	// Pad to 512 bytes, as cpio does, before the next archive.
	for w.n%512 != 0 {
		w.w.WriteByte(0)
		w.n++
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	b, err := os.Open(base)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := io.Copy(f, b); err != nil {
		return err
	}
	return f.Close()
}

// cpioWriter writes the newc ("070701") format the kernel unpacks.
type cpioWriter struct {
	w   *bufio.Writer
	n   int64
	ino uint32
}

func (c *cpioWriter) pad() {
	for c.n%4 != 0 {
		c.w.WriteByte(0)
		c.n++
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) error {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.w.WriteString(hdr)
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.n += int64(len(hdr) + len(name) + 1)
	c.pad()
	c.w.Write(data)
	c.n += int64(len(data))
	c.pad()
	return nil
}

// directIO reports whether path's file system opens it with O_DIRECT
// (tmpfs before Linux 6.6 does not), as qemu's cache=none needs.
func directIO(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
