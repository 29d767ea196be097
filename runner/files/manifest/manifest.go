// Package manifest records what an exec ran on: for each host its system,
// NICs, the server file's storage and the node binary, and once per exec
// the plan itself. It is written as RUN_ID.json beside the CSV before the
// first row, so the run_id column of every row leads to it.
//
// Facts are gathered by runner/hosts/hostfacts, with one shell command per host
// (round trips and forks are what a remote host costs), and every fact is
// optional: a missing tool, file or device leaves its field empty, never
// fails the exec.
package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
)

// Manifest is one exec's provenance. Field names are snake_case and
// stable: scripts read them.
type Manifest struct {
	RunID         string `json:"run_id"`
	CreatedAt     string `json:"created_at"` // RFC 3339 UTC
	RunnerVersion string `json:"runner_version"`
	Plan          Plan   `json:"plan"`
	Hosts         []Host `json:"hosts"` // the server's role first, then the client's
	// ODPProbes are exec's verified ODP reads, one per server, when the
	// exec ran odp points.
	ODPProbes []ODPProbe `json:"odp_probes,omitempty"`
	// DiskCeilings are the disk's ceiling under each server's file, one
	// per host, measured just before its first cold point
	// (docs/ssd.md#the-disks-ceiling).
	DiskCeilings []DiskCeiling `json:"disk_ceilings,omitempty"`
	// Calibrations are the latest runner check --calibrate of each of the
	// exec's server and client pairs, as found beside the CSV
	// (CalibrationPathFor); none when the hosts were not calibrated.
	Calibrations []Calibration `json:"calibrations,omitempty"`
	// LinkCapacities are the links measured because their NIC reports no
	// line rate, one per server and client host pair and transport
	// (docs/telemetry.md#what-bound-a-row).
	LinkCapacities []LinkCapacity `json:"link_capacities,omitempty"`
}

// LinkCapacity is what the peer (iperf3 over tcp, ib_read_bw over rdma)
// read at 1 MiB between two hosts whose link has no line rate: the
// capacity the rows between them weigh the link's share against. MBs is 0
// and Error says why when the run failed.
type LinkCapacity struct {
	Server    string  `json:"server"` // as the CSV's server_host names it
	Client    string  `json:"client"`
	Transport string  `json:"transport"`
	Workload  string  `json:"workload"`
	MBs       float64 `json:"mb_s"`
	Error     string  `json:"error,omitempty"`
}

// DiskCeiling is the best of a server file's ceiling grid
// (peer.CeilingRuns), with every run beside it, the probe first.
type DiskCeiling struct {
	Host string       `json:"host"` // as the CSV's server_host names it
	File string       `json:"file"`
	MBs  float64      `json:"mb_s"` // the fastest run's
	Runs []CeilingRun `json:"runs"`
}

// CeilingRun is one fio run of the ceiling: its argv and MB/s. Probe
// marks the short time-based run that sizes the grid, which is the
// ceiling only when no grid run fitted.
type CeilingRun struct {
	Argv  []string `json:"argv"`
	MBs   float64  `json:"mb_s"`
	Probe bool     `json:"probe,omitempty"`
}

// Ceilings are the manifest's disk ceilings by host, for
// results.Row.SetDiskCeiling.
func (m *Manifest) Ceilings() map[string]float64 {
	out := map[string]float64{}
	for _, c := range m.DiskCeilings {
		out[c.Host] = c.MBs
	}
	return out
}

// ODPProbe is one verified read of an odp-registered region, before any
// point: whether the server's device returns the right bytes through
// on-demand paging.
type ODPProbe struct {
	Role   string `json:"role"`
	Host   string `json:"host"`
	Kernel string `json:"kernel"`
	// Result is ODPVerified, ODPWrongData or ODPFailed; Message node's
	// error for the last two.
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
	// Trusted: wrong data, and the plan's rdma.trust_odp ran the odp
	// points anyway.
	Trusted bool `json:"trusted,omitempty"`
}

// ODPProbe results.
const (
	ODPVerified  = "verified"
	ODPWrongData = "wrong_data"
	ODPFailed    = "failed"
)

// Plan is the plan file as the exec read it.
type Plan struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	SHA256 string `json:"sha256"` // of the file's bytes
	// GitDescribe is `git describe --dirty --always` of the repository
	// holding the plan file; empty when it is in none.
	GitDescribe string   `json:"git_describe"`
	Text        string   `json:"text"`          // the file's bytes, before --set
	Set         []string `json:"set,omitempty"` // --set assignments applied over Text
}

// Host is one role's machine.
type Host struct {
	Role        string `json:"role"` // "server" or "client"
	Name        string `json:"name"` // as the CSV's server_host/client_host name it
	Hostname    string `json:"hostname"`
	Kernel      string `json:"kernel"`
	Arch        string `json:"arch"`
	CPUModel    string `json:"cpu_model"`
	CPUGovernor string `json:"cpu_governor"` // of cpu0; "none: no cpufreq" without cpufreq
	CPUs        string `json:"cpus"`         // the role's pinning (hosts.<role>.cpus); empty: none
	NICs        []NIC  `json:"nics"`         // every RDMA device port; empty when there is none
	File        *File  `json:"file,omitempty"`
	Node        Node   `json:"node"`
	// RDMA is what node's rdma transport used on this role's side: the
	// device, port and GID, how the QPs were connected and their
	// attributes, from the role's ready (server) or result (client)
	// events; one entry per distinct path seen in the exec, normally one.
	// Filled in as points run. What the CSV's columns hold
	// (queue_depth_per_qp, cq_moderation, relaxed_ordering) is left out;
	// max_rd_atomic is kept, since an auto one is empty in the CSV.
	RDMA []results.RDMAPath `json:"rdma,omitempty"`
	// Clock is the host's wall clock against the runner's when the exec
	// began; nil when it could not be read.
	Clock *Clock `json:"clock,omitempty"`
	// State is how the host was set up: cpufreq, THP, the kernel command
	// line and its PCIe NICs' links and IRQs.
	State HostState `json:"state"`
}

// Clock is where a host's CLOCK_REALTIME stood against the runner's: the
// true offset lies within OffsetNs ± UncertaintyNs (half the reading's
// round trip). The time series' timestamps are the hosts' own clocks.
type Clock struct {
	OffsetNs      int64 `json:"offset_ns"`
	UncertaintyNs int64 `json:"uncertainty_ns"`
}

// NIC is one port of an RDMA device, from /sys/class/infiniband and
// `node devices`.
type NIC struct {
	Device    string `json:"device"`
	Port      int    `json:"port"`
	Firmware  string `json:"firmware"`
	Rate      string `json:"rate"` // as sysfs says it, "100 Gb/sec (4X EDR)"
	LinkLayer string `json:"link_layer"`
	State     string `json:"state"`
	Netdev    string `json:"netdev,omitempty"` // RoCE: the network interface
	// ActiveMTU is the RDMA path MTU in bytes (from node devices, 0 when
	// unknown); NetdevMTU the interface's MTU (RoCE only).
	ActiveMTU int   `json:"active_mtu"`
	NetdevMTU int   `json:"netdev_mtu,omitempty"`
	NUMANode  *int  `json:"numa_node"` // nil when unknown; -1 means no affinity
	GIDs      []GID `json:"gids"`
}

// GID is one populated GID table entry; Type is what the plan's gid_index
// picks between ("IB", "RoCE v1", "RoCE v2").
type GID struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	GID   string `json:"gid"`
}

// File is where the server's data file lives.
type File struct {
	Path        string `json:"path"`
	Exists      bool   `json:"exists"`
	FSType      string `json:"fs_type"`
	FSDevice    string `json:"fs_device"`    // df's source: /dev/nvme0n1p1, tmpfs, overlay
	BlockDevice string `json:"block_device"` // the disk under it, from lsblk
	Model       string `json:"model"`
	NUMANode    *int   `json:"numa_node"`
}

// Node is the node binary the role runs: Path and SHA256 as the host has
// it, Binary and Arch the file of the build it was chosen from for the
// host's architecture (node.binary, or a node-linux-GOARCH beside it).
type Node struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Binary  string `json:"binary,omitempty"`
	Arch    string `json:"arch,omitempty"` // as uname -m names it: "x86_64", "aarch64"
}

// ForPlan describes the plan file at path with the bytes the exec read.
// git describe runs with ctx; its failure (no git, no repository) leaves
// GitDescribe empty.
func ForPlan(ctx context.Context, path, name string, source []byte, set []string) Plan {
	sum := sha256.Sum256(source)
	pl := Plan{Path: path, Name: name, SHA256: hex.EncodeToString(sum[:]), Text: string(source), Set: set}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "describe", "--dirty", "--always")
	// Only the repository holding the plan counts, never one found by a
	// stray GIT_DIR in the environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_DIR=") && !strings.HasPrefix(kv, "GIT_WORK_TREE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.Output(); err == nil {
		pl.GitDescribe = strings.TrimSpace(string(out))
	}
	return pl
}

// PathFor is where the manifest of runID goes: RUN_ID.json in the CSV's
// directory.
func PathFor(csvPath, runID string) string {
	return filepath.Join(filepath.Dir(csvPath), runID+".json")
}

// Write writes m to path whole or not at all (a temp file renamed over it).
func Write(path string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	err = outdir.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// Read reads a manifest written by Write.
func Read(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}
