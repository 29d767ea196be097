// Package hostfacts gathers what one host is, with a single shell command:
// its system and limits, its RDMA ports (from sysfs and from node), the
// server's data file and the storage under it, and the node binary. One
// script and one parser serve every reader: deploy takes the host's
// architecture from it, runner check judges the facts (runner/points/preflight),
// and the manifest records them (runner/files/manifest).
//
// A host that cannot run the script has no working POSIX shell, and no
// node can be started there either: Collect then fails with a
// *NoShellError, which callers find with errors.Is(err, ErrNoShell) or
// errors.As.
package hostfacts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
)

// Query says what to collect on one host.
type Query struct {
	NodePath string // node's absolute path on the host; "" for none
	File     string // the server's data file; "" for none (a client)
	// Devices are extra arguments of node devices: --address IP (the
	// server's listen address) or --route-to IP (a client's server), and
	// the plan's --rdma-device, --ib-port, --gid-index, so node says
	// which device, port and GID that role's connection would use.
	Devices []string
	// Sysroot prefixes /proc and /sys, so tests can point the script at
	// a fake tree; "" on real hosts.
	Sysroot string
}

// Facts are what one host says about itself. Anything the host did not
// say is left zero (UID -1, AvailBytes -1, NUMA nodes nil).
type Facts struct {
	Hostname, Kernel, Arch string
	CPUModel               string
	CPUGovernor            string // of cpu0; "" without cpufreq (also State.CPUFreq)
	UID                    int    // effective uid of the login; -1 when unknown
	Memlock                string // as `ulimit -l` says it: "unlimited" or KiB
	NICs                   []NIC  // every RDMA device port in sysfs
	// NUMACPUs is each NUMA node's CPU list, as sysfs writes it ("0-15,32-47");
	// nil when the kernel has no NUMA topology.
	NUMACPUs map[int]string
	Node     Node
	Devices  []results.Device // from node devices --json
	// DevicesError is node's message when it could not list devices (a
	// node built without rdma, no libibverbs); "" otherwise.
	DevicesError string
	// Choice is the device, port and GID node would use for the role's
	// connection, and ChoiceError why it would refuse (Query.Devices
	// asked); both empty when not asked or from an older node.
	Choice      *results.DeviceChoice
	ChoiceError string
	// Host is node's own view of the host (node host): MemAvailable,
	// memlock, NUMA nodes; nil from an older node or none.
	Host *results.Host
	File *File // nil when the query named no file
	// State is how the host is set up: cpufreq, THP, the kernel command
	// line, and its network devices' PCIe links.
	State State
}

// NIC is one port of an RDMA device, from /sys/class/infiniband; ActiveMTU
// comes from node devices, which sysfs lacks.
type NIC struct {
	Device    string
	Port      int
	Firmware  string
	Rate      string // as sysfs says it, "100 Gb/sec (4X EDR)"
	LinkLayer string
	State     string
	Netdev    string // RoCE: the network interface
	NetdevMTU int
	ActiveMTU int  // bytes; 0 when unknown
	NUMANode  *int // -1 means no affinity
	GIDs      []GID
}

// GID is one populated GID table entry.
type GID struct {
	Index int
	Type  string // "IB", "RoCE v1", "RoCE v2", as sysfs says it
	GID   string
}

// Node describes the node binary at Query.NodePath.
type Node struct {
	Present    bool
	Version    string
	Transports []string
	SHA256     string
}

// File describes the data file and where it would live.
type File struct {
	Path        string
	Exists      bool
	Size        int64
	Sidecar     bool   // FILE + results.SidecarSuffix exists: node made the file
	DirExists   bool   // the file's directory exists
	DirWritable bool   // and this user may create files in it
	MeasuredAt  string // the nearest existing path, which df looked at
	FSType      string
	FSDevice    string // df's source: /dev/nvme0n1p1, tmpfs, overlay
	AvailBytes  int64  // free there; -1 when unknown
	BlockDevice string // the disk under it, from lsblk
	BlockModel  string
	BlockNUMA   *int
}

// ErrNoShell is matched (errors.Is) by every *NoShellError.
var ErrNoShell = errors.New("no working /bin/sh on the host")

// NoShellError means the host never ran the facts script: its login shell
// or /bin/sh is missing or broken. node is started through the login
// shell, and the runner's own commands through /bin/sh, so nothing can
// run there.
type NoShellError struct {
	// Status is the command's exit status (127: not found, 126: cannot
	// execute); -1 when the local sh could not be started at all.
	Status int
	// Said is the first line the host printed on stderr, or why the local
	// sh could not start; it may be "".
	Said string
}

func (e *NoShellError) Error() string {
	how := fmt.Sprintf("exit %d", e.Status)
	if e.Status < 0 {
		how = e.Said
	}
	return fmt.Sprintf("%s (%s) — the node needs a POSIX shell to be started", ErrNoShell, how)
}

// Is makes errors.Is(err, ErrNoShell) hold.
func (e *NoShellError) Is(target error) bool { return target == ErrNoShell }

// Hint says what to do, quoting the host.
func (e *NoShellError) Hint() string {
	hint := "give the plan's user a login shell that runs, and a POSIX sh at /bin/sh"
	if e.Said != "" && e.Status >= 0 {
		hint = fmt.Sprintf("the host said %q; %s", e.Said, hint)
	}
	return hint
}

// marker is the script's first output line: without it, no shell ran it.
const marker = "hostfacts"

// Collect gathers h's facts with one command. Its errors start "cannot
// collect facts: " and do not name the host: the caller does, once.
func Collect(ctx context.Context, h remote.Host, q Query) (Facts, error) {
	argv := append([]string{"/bin/sh", "-c", script, "sh", q.Sysroot, q.NodePath, q.File, results.SidecarSuffix}, q.Devices...)
	out, err := h.Run(ctx, argv)
	if ctx.Err() != nil {
		return Facts{}, fmt.Errorf("cannot collect facts: %w", ctx.Err())
	}
	if !ran(out) {
		if nosh := noShell(err); nosh != nil {
			return Facts{}, fmt.Errorf("cannot collect facts: %w", nosh)
		}
	}
	if err != nil {
		return Facts{}, fmt.Errorf("cannot collect facts: %w", err)
	}
	f := parse(out)
	if q.File != "" {
		if f.File == nil {
			f.File = &File{AvailBytes: -1}
		}
		f.File.Path = q.File
	}
	return f, nil
}

// ran reports whether out holds the script's marker line.
func ran(out []byte) bool {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	k, _, _ := strings.Cut(string(line), "\t")
	return k == marker
}

// noShell explains a run that printed no marker, or returns nil when the
// failure says nothing about the shell (a lost connection, a signal).
func noShell(err error) *NoShellError {
	var (
		ee *remote.ExitError
		pe *fs.PathError // the local host could not start /bin/sh
	)
	switch {
	case err == nil:
		return &NoShellError{Status: 0} // exited 0 without running a line of it
	case errors.As(err, &ee) && ee.Signal == "":
		said, _, _ := strings.Cut(strings.TrimSpace(string(ee.Stderr)), "\n")
		return &NoShellError{Status: ee.Status, Said: said}
	case errors.As(err, &pe):
		return &NoShellError{Status: -1, Said: err.Error()}
	}
	return nil
}

// parse reads the script's output. Unknown lines are ignored, so an older
// runner reads a newer script's output.
func parse(out []byte) Facts {
	f := Facts{UID: -1}
	var file *File
	for _, line := range strings.Split(string(out), "\n") {
		fs := strings.Split(line, "\t")
		if len(fs) < 2 {
			continue
		}
		v := strings.TrimSpace(fs[1])
		f.State.stateLine(fs, v) // cpu_governor is also the system's
		if !f.systemLine(fs, v) && !f.rdmaLine(fs) && !f.nodeLine(fs[0], v) {
			file = fileLine(file, fs[0], v)
		}
	}
	// node's view of a port adds the active MTU.
	for _, d := range f.Devices {
		for _, p := range d.Ports {
			for i := range f.NICs {
				if f.NICs[i].Device == d.Name && f.NICs[i].Port == p.Port {
					f.NICs[i].ActiveMTU = p.ActiveMTU
				}
			}
		}
	}
	f.File = file
	return f
}

// systemLine reads a line about the system (fs its tab-separated fields,
// v the first value trimmed) and says whether it was one.
func (f *Facts) systemLine(fs []string, v string) bool {
	switch fs[0] {
	case "hostname":
		f.Hostname = v
	case "kernel":
		f.Kernel = v
	case "arch":
		f.Arch = v
	case "uid":
		if n, err := strconv.Atoi(v); err == nil {
			f.UID = n
		}
	case "memlock_bytes":
		f.Memlock = memlock(v)
	case "cpu_model":
		f.CPUModel = v
	case "cpu_governor":
		f.CPUGovernor = v
	case "numa_cpus":
		n, err := strconv.Atoi(v)
		if err != nil || len(fs) < 3 {
			return true
		}
		if f.NUMACPUs == nil {
			f.NUMACPUs = map[int]string{}
		}
		f.NUMACPUs[n] = strings.TrimSpace(fs[2])
	default:
		return false
	}
	return true
}

// rdmaLine reads a line about an RDMA port or one of its GIDs, and says
// whether it was one.
func (f *Facts) rdmaLine(fs []string) bool {
	switch fs[0] {
	case "nic":
		if len(fs) < 10 {
			return true
		}
		port, _ := strconv.Atoi(fs[2])
		mtu, _ := strconv.Atoi(fs[8])
		f.NICs = append(f.NICs, NIC{
			Device: fs[1], Port: port, Firmware: fs[3], Rate: fs[4], LinkLayer: fs[5],
			State: fs[6], Netdev: fs[7], NetdevMTU: mtu, NUMANode: numa(fs[9]),
		})
	case "gid":
		if len(fs) < 6 {
			return true
		}
		port, _ := strconv.Atoi(fs[2])
		idx, err := strconv.Atoi(fs[3])
		if err != nil {
			return true
		}
		for i := range f.NICs {
			if f.NICs[i].Device == fs[1] && f.NICs[i].Port == port {
				f.NICs[i].GIDs = append(f.NICs[i].GIDs, GID{Index: idx, Type: fs[4], GID: fs[5]})
			}
		}
	default:
		return false
	}
	return true
}

// nodeLine reads a line about the deployed node and what it said, and
// says whether it was one.
func (f *Facts) nodeLine(key, v string) bool {
	switch key {
	case "node_present":
		f.Node.Present = true
	case "node_version":
		var ver results.Version
		if json.Unmarshal([]byte(v), &ver) == nil {
			f.Node.Version, f.Node.Transports = ver.Version, ver.Transports
		}
	case "node_devices":
		// A DevicesList, or node's Error event when it has none.
		var d struct {
			results.DevicesList
			Message string `json:"message"`
		}
		switch err := json.Unmarshal([]byte(v), &d); {
		case err != nil:
			f.DevicesError = v
		case d.Type == results.TypeDevices:
			f.Devices = d.Devices
			f.Choice, f.ChoiceError = d.Choice, d.ChoiceError
		default:
			f.DevicesError = d.Message
		}
	case "node_host":
		var h results.Host
		if json.Unmarshal([]byte(v), &h) == nil && h.Type == results.TypeHost {
			f.Host = &h
		}
	case "node_sha256":
		f.Node.SHA256 = v
	default:
		return false
	}
	return true
}

// fileLine reads a line about the data file and its storage into file,
// made on the first such line; other lines leave it as it is.
func fileLine(file *File, key, v string) *File {
	of := func() *File {
		if file == nil {
			file = &File{AvailBytes: -1}
		}
		return file
	}
	switch key {
	case "file_exists":
		of().Exists = v == "yes"
	case "file_size":
		of().Size, _ = strconv.ParseInt(v, 10, 64)
	case "sidecar":
		of().Sidecar = true
	case "dir_exists":
		of().DirExists = true
	case "dir_writable":
		of().DirWritable = true
	case "measured_at":
		of().MeasuredAt = v
	case "fs_device":
		of().FSDevice = v
	case "fs_type":
		of().FSType = v
	case "avail_kib":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			of().AvailBytes = n * 1024
		}
	case "block_device":
		of().BlockDevice = v
	case "block_model":
		of().BlockModel = v
	case "block_numa":
		of().BlockNUMA = numa(v)
	}
	return file
}

// memlock turns /proc/self/limits' soft limit (bytes or "unlimited") into
// what `ulimit -l` prints: "unlimited" or KiB.
func memlock(v string) string {
	if v == "unlimited" {
		return v
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(n/1024, 10)
}

func numa(s string) *int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return &n
}
