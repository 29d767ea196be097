package nvmeof

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is what a host connects to: the subsystem NQN at Addr:SvcID over
// Transport, as HostNQN with HostID ("" the kernel's default), proving Key
// (DH-HMAC-CHAP, DHHC-1 form; "" none) where the target asks for it, with
// IOQueues I/O queues of QueueSize entries each (0: the kernel's
// defaults, one queue per CPU of 128 entries).
type Conn struct {
	NQN, HostNQN string
	HostID       string
	Transport    string
	Addr         string
	SvcID        int
	Key          string
	IOQueues     int
	QueueSize    int
}

// The queue sizes nvme-fabrics takes (NVMF_MIN_QUEUE_SIZE and
// NVMF_MAX_QUEUE_SIZE); a transport may clamp lower (nvme-rdma to 128 on
// 6.1), saying so in the kernel log.
const (
	MinQueueSize = 16
	MaxQueueSize = 1024
)

// QueueSize is the queue_size that holds depth reads in flight on one
// queue, within what nvme-fabrics takes.
func QueueSize(depth int) int {
	return min(max(depth, MinQueueSize), MaxQueueSize)
}

// options are c's line for /dev/nvme-fabrics.
func (c Conn) options() string {
	opts := fmt.Sprintf("transport=%s,traddr=%s,trsvcid=%d,nqn=%s,hostnqn=%s,reconnect_delay=%d,ctrl_loss_tmo=%d",
		c.Transport, c.Addr, c.SvcID, c.NQN, c.HostNQN, ReconnectDelay, CtrlLossTmo)
	if c.IOQueues > 0 {
		opts += fmt.Sprintf(",nr_io_queues=%d", c.IOQueues)
	}
	if c.QueueSize > 0 {
		opts += fmt.Sprintf(",queue_size=%d", c.QueueSize)
	}
	if c.HostID != "" {
		opts += ",hostid=" + c.HostID
	}
	if c.Key != "" {
		// A kernel without host authentication takes the option and
		// ignores it; a target that asks for the key then refuses us.
		opts += ",dhchap_secret=" + c.Key
	}
	return opts
}

// ReconnectDelay and CtrlLossTmo (seconds) are how the kernel treats a
// controller whose target has gone: it tries again every ReconnectDelay,
// and removes the controller itself after CtrlLossTmo, failing the reads
// that wait on it. The kernel's defaults (10 s and 600 s) would keep a
// controller, and a fio's reads, for ten minutes after its target went
// with no one left to delete it (its node killed or stopped, or deleting
// it first and its target gone before). A point whose link is down for
// longer than CtrlLossTmo fails rather than stalls; a node that lives
// deletes its controller itself, at once (Disconnect).
const (
	ReconnectDelay = 1
	CtrlLossTmo    = 3
)

// secretAttrs are the controller's sysfs files that show its DH-HMAC-CHAP
// secrets, world-readable as the kernel makes them.
var secretAttrs = []string{"dhchap_secret", "dhchap_ctrl_secret"}

// Connect makes a controller for c through /dev/nvme-fabrics (no
// nvme-cli), recording it first. The kernel answers the write with
// "instance=N,cntlid=M": the controller is nvmeN.
func (s Sys) Connect(ctx context.Context, c Conn) (*Made, error) {
	if c.SvcID == 0 {
		c.SvcID = DefaultSvcID
	}
	m := &Made{Target: Target{NQN: c.NQN, HostNQN: c.HostNQN, Transport: c.Transport, Addr: c.Addr, SvcID: c.SvcID}, PID: os.Getpid()}
	if err := s.record(m); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.Fabrics, os.O_RDWR, 0)
	if err != nil {
		os.Remove(m.record)
		return nil, fmt.Errorf("open %s: %w (load nvme-fabrics and nvme-%s)", s.Fabrics, err, c.Transport)
	}
	defer f.Close()
	if _, err := f.Write([]byte(c.options())); err != nil {
		os.Remove(m.record)
		return nil, fmt.Errorf("connect to %s at %s:%d over %s: %w", c.NQN, c.Addr, c.SvcID, c.Transport, err)
	}
	b := make([]byte, 256)
	n, err := f.Read(b)
	if err != nil {
		return m, fmt.Errorf("read the new controller from %s: %w", s.Fabrics, err)
	}
	inst, ok := instanceRE.FindStringSubmatch(string(b[:n])), true
	if inst == nil {
		ok = false
	}
	if !ok {
		return m, fmt.Errorf("read the new controller from %s: %q", s.Fabrics, b[:n])
	}
	m.Controller = "nvme" + inst[1]
	if err := s.save(m); err != nil {
		return m, err
	}
	return m, s.hideSecrets(m)
}

// hideSecrets makes m's controller's secret files root's alone (the
// kernel shows them to every local user).
func (s Sys) hideSecrets(m *Made) error {
	for _, a := range secretAttrs {
		p := filepath.Join(s.Class, m.Controller, a)
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("hide %s from other users: %w", p, err)
		}
	}
	return nil
}

// ReadOnly marks the block device dev read-only (BLKROSET), so nothing on
// this host writes through it to the target's file.
func ReadOnly(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s to make it read-only: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.BLKROSET, 1); err != nil {
		return fmt.Errorf("make %s read-only (BLKROSET): %w", dev, err)
	}
	return nil
}

var instanceRE = regexp.MustCompile(`instance=(\d+)`)

// Controller checks that m's controller is the subsystem it connected to
// (by its NQN in sysfs) and returns its serial number, the target's
// attr_serial.
func (s Sys) Controller(m *Made) (serial string, err error) {
	dir := filepath.Join(s.Class, m.Controller)
	nqn, err := readTrim(filepath.Join(dir, "subsysnqn"))
	if err != nil {
		return "", fmt.Errorf("controller %s: %w", m.Controller, err)
	}
	if nqn != m.Target.NQN {
		return "", fmt.Errorf("controller %s is of %s, not %s", m.Controller, nqn, m.Target.NQN)
	}
	return readTrim(filepath.Join(dir, "serial"))
}

// Namespace waits up to wait for the block device of the namespace nsid
// the subsystem m connected to exports, found by the subsystem's NQN in
// sysfs (with native multipath the device is nvmeXnNSID of the subsystem,
// not of the controller), and returns its /dev path.
func (s Sys) Namespace(ctx context.Context, m *Made, nsid int, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		ents, _ := os.ReadDir(s.Block)
		for _, e := range ents {
			mm := nsRE.FindStringSubmatch(e.Name())
			if mm == nil || mm[1] != strconv.Itoa(nsid) {
				continue
			}
			if nqn, err := readTrim(filepath.Join(s.Block, e.Name(), "device", "subsysnqn")); err == nil && nqn == m.Target.NQN {
				return "/dev/" + e.Name(), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no block device of %s's namespace %d after %s", m.Target.NQN, nsid, wait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nsRE is a namespace's block device, nvmeXnY (not a path's nvmeXcZnY).
var nsRE = regexp.MustCompile(`^nvme\d+n(\d+)$`)

// Disconnect deletes m's controller, when it is still m's subsystem's, and
// the record.
func (s Sys) Disconnect(m *Made) error {
	if m.Controller != "" {
		dir := filepath.Join(s.Class, m.Controller)
		nqn, err := readTrim(filepath.Join(dir, "subsysnqn"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			// gone already
		case err != nil:
			return fmt.Errorf("disconnect %s: %w", m.Controller, err)
		case nqn != m.Target.NQN:
			// the instance was reused by another subsystem's controller
		default:
			err := writeAttr(filepath.Join(dir, "delete_controller"), "1")
			if errors.Is(err, os.ErrNotExist) {
				// The kernel removes the attribute first when it deletes
				// the controller itself (CtrlLossTmo), or another delete
				// did: it is going.
				err = nil
			}
			if err != nil {
				return fmt.Errorf("disconnect %s from %s: %w", m.Controller, m.Target.NQN, err)
			}
		}
	}
	if m.record != "" {
		if err := os.Remove(m.record); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeAttr writes v to the sysfs attribute p, which must exist (no
// O_CREAT: where p has gone, the error is ErrNotExist, not EACCES).
func writeAttr(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}
