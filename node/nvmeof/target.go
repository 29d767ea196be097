// Package nvmeof sets up and tears down NVMe over Fabrics for node's
// nvmeof commands: the kernel's target (nvmet) through configfs on the
// server, and the initiator's controller through /dev/nvme-fabrics on the
// client. It runs no tool and measures nothing.
//
// The rules it keeps:
//   - A subsystem admits one host NQN, never any host (attr_allow_any_host 0),
//     and where the kernel has in-band authentication (CONFIG_NVME_TARGET_AUTH:
//     the host entry has dhchap_key) only a host that proves the point's
//     DH-HMAC-CHAP key. The host entry is made 0700 before the key is
//     written, so no other local user reads the key back from configfs.
//   - The port listens on one address, never the wildcard.
//   - Everything is made by a mkdir or a symlink that fails when the name
//     exists, so what Setup made is this run's alone, and teardown removes
//     only what Made lists, in reverse order; nothing else is touched.
//   - What is made is recorded on the host (Records) before it is made, so
//     Clean can remove it after the process that made it was killed.
package nvmeof

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"rdmasweep/results"
)

// Sys holds the paths of the kernel's interfaces; tests point them at a
// directory of their own.
type Sys struct {
	Configfs string // configfs's mount point, /sys/kernel/config
	Module   string // /sys/module
	Class    string // /sys/class/nvme
	Block    string // /sys/block
	Fabrics  string // /dev/nvme-fabrics
	Records  string // where what was made is recorded, /run/rdmasweep/nvmeof
}

// Host is the running kernel's Sys.
var Host = Sys{Configfs: "/sys/kernel/config", Module: "/sys/module", Class: "/sys/class/nvme",
	Block: "/sys/block", Fabrics: "/dev/nvme-fabrics", Records: results.NVMeOFRecords}

func (s Sys) nvmet() string { return filepath.Join(s.Configfs, "nvmet") }

// DefaultSvcID is NVMe over Fabrics' registered port, 4420.
const DefaultSvcID = 4420

// Target is one run's target: a subsystem named NQN with one namespace
// backed by Path, admitting HostNQN alone, on a port at Addr:SvcID over
// Transport ("rdma" or "tcp").
type Target struct {
	NQN, HostNQN string
	Transport    string
	Addr         string
	SvcID        int
	// Path is what nvmet opens, by name, as root, following links: node
	// passes /proc/PID/fd/N of the file it checked and holds open, never
	// the file's own path, which another user might swap.
	Path string
	// Key is the host's DH-HMAC-CHAP secret (DHHC-1 form; "" none). It
	// is never recorded.
	Key string `json:"-"`
	// Buffered has the kernel read a file through the page cache
	// (buffered_io 1); a block device ignores it.
	Buffered bool
	// Serial is the subsystem's serial number (attr_serial), which the
	// host reads back from its controller: node passes the file's pattern
	// seed there.
	Serial string
}

// Made is what Setup made, in the order it was made: configfs paths,
// each a directory (mkdir) or a symbolic link.
type Made struct {
	Target Target   `json:"target"`
	PortID int      `json:"port_id"`
	Paths  []string `json:"paths"`
	// Controller is the host side's controller (nvmeN), for a record of
	// Connect.
	Controller string `json:"controller,omitempty"`
	// Auth reports that the host must prove Target.Key: the kernel has
	// in-band authentication, and the key was set.
	Auth   bool   `json:"auth,omitempty"`
	PID    int    `json:"pid"`
	Start  string `json:"start_time"` // /proc/PID/stat's field 22
	record string
}

// ErrExists is wrapped when a name Setup would make is taken: another
// run's, or someone's own.
var ErrExists = errors.New("already exists")

// Setup makes t's target under s's configfs and records it. On an error
// it removes what it made. The port's id is a random free one.
func (s Sys) Setup(ctx context.Context, t Target) (*Made, error) {
	if t.SvcID == 0 {
		t.SvcID = DefaultSvcID
	}
	if ip := net.ParseIP(t.Addr); ip == nil || ip.IsUnspecified() {
		return nil, fmt.Errorf("the target's address %q: want the server's own data address, not the wildcard", t.Addr)
	}
	root := s.nvmet()
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("nvmet's configfs %s: %w (load nvmet and mount configfs on %s)", root, err, s.Configfs)
	}
	m := &Made{Target: t, PID: os.Getpid()}
	var err error
	if m.PortID, err = s.freePort(); err != nil {
		return nil, err
	}
	if err := s.record(m); err != nil {
		return nil, err
	}
	if err := s.make(ctx, m); err != nil {
		return nil, errors.Join(err, s.Teardown(m))
	}
	return m, nil
}

// make runs Setup's steps, appending each made path to m before it is
// made and saving the record, so a kill between two steps leaves a record
// of all it made (a path listed but not made is skipped by teardown).
func (s Sys) make(ctx context.Context, m *Made) error {
	t, root := m.Target, s.nvmet()
	sub := filepath.Join(root, "subsystems", t.NQN)
	host := filepath.Join(root, "hosts", t.HostNQN)
	ns := filepath.Join(sub, "namespaces", "1")
	port := filepath.Join(root, "ports", strconv.Itoa(m.PortID))
	buffered := "0"
	if t.Buffered {
		buffered = "1"
	}
	steps := []struct {
		path, link string // a mkdir, or a symlink to link
		attrs      [][2]string
		then       func(dir string) error // after the mkdir, before attrs
	}{
		{path: host, then: func(dir string) error { return s.hostKey(m, dir) }},
		{path: sub, attrs: [][2]string{{"attr_allow_any_host", "0"}, {"attr_serial", t.Serial}}},
		{path: filepath.Join(sub, "allowed_hosts", t.HostNQN), link: host},
		{path: ns, attrs: [][2]string{{"device_path", t.Path}, {"buffered_io", buffered}, {"enable", "1"}}},
		{path: port, attrs: [][2]string{{"addr_trtype", t.Transport}, {"addr_adrfam", "ipv4"},
			{"addr_traddr", t.Addr}, {"addr_trsvcid", strconv.Itoa(t.SvcID)}}},
		{path: filepath.Join(port, "subsystems", t.NQN), link: sub},
	}
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.Paths = append(m.Paths, st.path)
		if err := s.save(m); err != nil {
			return err
		}
		var err error
		if st.link != "" {
			err = os.Symlink(st.link, st.path)
		} else {
			err = os.Mkdir(st.path, 0o755)
		}
		if errors.Is(err, os.ErrExist) {
			m.Paths = m.Paths[:len(m.Paths)-1] // not ours: never removed
			return fmt.Errorf("make %s: %w: another run's or made by hand, and left alone", st.path, ErrExists)
		}
		if err != nil {
			m.Paths = m.Paths[:len(m.Paths)-1]
			return fmt.Errorf("make %s: %w", st.path, err)
		}
		if st.then != nil {
			if err := st.then(st.path); err != nil {
				return err
			}
		}
		for _, a := range st.attrs {
			if a[1] == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(st.path, a[0]), []byte(a[1]), 0o644); err != nil {
				return fmt.Errorf("set %s to %q: %w", filepath.Join(st.path, a[0]), a[1], err)
			}
		}
	}
	return nil
}

// hostKey closes the host entry dir to other users (configfs shows
// dhchap_key to whoever can reach it) and sets m's key there, when the
// kernel has the attribute; m.Auth says whether it did.
func (s Sys) hostKey(m *Made, dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("close %s to other users: %w", dir, err)
	}
	if m.Target.Key == "" {
		return nil
	}
	attr := filepath.Join(dir, "dhchap_key")
	if _, err := os.Stat(attr); errors.Is(err, os.ErrNotExist) {
		return nil // no CONFIG_NVME_TARGET_AUTH: the caller says so
	}
	if err := os.WriteFile(attr, []byte(m.Target.Key), 0o600); err != nil {
		return fmt.Errorf("set the host's DH-HMAC-CHAP key in %s: %w", attr, err)
	}
	m.Auth = true
	return nil
}

// freePort returns a port id no port under configfs has.
func (s Sys) freePort() (int, error) {
	for range 64 {
		var b [2]byte
		rand.Read(b[:])
		id := 1000 + int(binary.LittleEndian.Uint16(b[:]))%60000
		if _, err := os.Lstat(filepath.Join(s.nvmet(), "ports", strconv.Itoa(id))); errors.Is(err, os.ErrNotExist) {
			return id, nil
		}
	}
	return 0, errors.New("no free nvmet port id found")
}

// Teardown removes what m lists, newest first, and its record. A namespace
// is disabled before its directory goes. It goes on past a failure and
// returns them all.
func (s Sys) Teardown(m *Made) error {
	var errs []error
	for i := len(m.Paths) - 1; i >= 0; i-- {
		p := m.Paths[i]
		if !within(s.nvmet(), p) {
			errs = append(errs, fmt.Errorf("remove %s: not under %s, left alone", p, s.nvmet()))
			continue
		}
		if filepath.Base(filepath.Dir(p)) == "namespaces" {
			os.WriteFile(filepath.Join(p, "enable"), []byte("0"), 0o644) // best effort; rmdir disables too
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	if len(errs) == 0 {
		m.Paths = nil
		if m.record != "" {
			if err := os.Remove(m.record); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove the record %s: %w", m.record, err))
			}
		}
	}
	return errors.Join(errs...)
}

// within reports whether p is dir or below it, after cleaning.
func within(dir, p string) bool {
	p = filepath.Clean(p)
	return p != dir && strings.HasPrefix(p, filepath.Clean(dir)+"/")
}
