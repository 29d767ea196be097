package peer

// nvmeof: NVMe over Fabrics, the kernel's target (nvmet-rdma, or
// nvmet-tcp with transport: tcp) on the server, its initiator and fio on
// the client. Both sides are node's own commands (node nvmet, node
// nvmeof-read; node/nvmeof does the configfs and sysfs work), so the
// argv starts with NodeProgram, which the runner replaces with the
// deployed node. The mapping is nvmeofMap, below. Beside it:
//
//	the subsystem's NQN, the one host NQN it admits and that host's
//	DH-HMAC-CHAP key all come from the point's secret, which node reads
//	on its control line (--control-stdin), never from argv; never
//	allow_any_host; the port on the server's data address alone
//	cache cold -> buffered_io 0 (the target reads the drive directly);
//	      warm -> buffered_io 1, after node's warm step
//	the file is made as node serve makes it (--create), and its pattern
//	seed is the subsystem's serial number, which the client reads back
//	the client: fio --direct=1 --ioengine=io_uring on the namespace, then
//	a sample of blocks checked against the pattern; a mismatch fails
//	the row naming its offset
//	qps -> nr_io_queues, each read by its own fio job over its own range;
//	      queue_size the depth per queue (nvme-fabrics' 16 at least)
//
// node nvmet says ready when it listens on the next TCP port (4421),
// where node nvmeof-read proves it is done (the secret's challenge) once
// it has disconnected; then node nvmet tears the target down and exits.
// When their stdin ends (the runner's session gone, however),
// nvmeof-read kills fio, disconnects and proves its done all the same,
// and node nvmet waits a moment for that done before its teardown, so a
// controller is never left reconnecting to a target that went first
// (docs/workloads.md). Both record what they made on the host, for node
// nvmeof-clean after a kill of node itself.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// NVMeOF is NVMe over Fabrics, as a plan's workload names it.
const NVMeOF = "nvmeof"

var nvmeof = Tool{Name: NVMeOF, Binary: "fio", Debian: "fio", RHEL: "fio", Version: "3.33",
	Roles: []string{"client"}, HasServer: true, Map: nvmeofMap, Modules: nvmeofModules, Auth: nvmeofAuth,
	Clean: []string{NodeProgram, "nvmeof-clean"}, ReadsFile: true, ClockStep: time.Millisecond,
	build: buildNVMeOF, parse: parseNVMeOF}

// nvmeofModules: the target's on the server, the initiator's on the
// client (node/nvmeof's TargetModules and HostModules).
func nvmeofModules(role, transport string) []string {
	if transport == "" {
		transport = results.TransportRDMA
	}
	if role == "server" {
		return []string{"nvmet", "nvmet-" + transport}
	}
	return []string{"nvme-fabrics", "nvme-" + transport}
}

// nvmeofAuth: DH-HMAC-CHAP is the kernel's nvme-auth, which nvmet
// depends on when built with CONFIG_NVME_TARGET_AUTH and nvme-core with
// CONFIG_NVME_HOST_AUTH (Debian's 6.1 has neither, its 7.x both).
func nvmeofAuth(role string) KernelAuth {
	m := "nvme-core"
	if role == "server" {
		m = "nvmet"
	}
	return KernelAuth{Name: "DH-HMAC-CHAP", Module: m, Needs: "nvme-auth"}
}

// nvmeofMap is how nvmeof takes the plan's parameters.
var nvmeofMap = []Mapping{
	{Param: param.File, Option: "--file", Refuse: func(p Params) string {
		return refuseIf(p.File == "", "the target's namespace is the server's file, and the point names none")
	}},
	{Param: param.FileSize, Option: "--file-size", Refuse: func(p Params) string {
		return refuseIf(p.FileSize <= 0, "nvmeof needs the served size (got %d)", p.FileSize)
	}},
	{Param: param.BlockSize, Option: "--block-size", Refuse: func(p Params) string {
		return refuseIf(p.BlockSize%512 != 0 || (p.FileSize > 0 && p.BlockSize > p.FileSize),
			"O_DIRECT reads of whole 512-byte sectors within file_size %d (got %d)", p.FileSize, p.BlockSize)
	}},
	{Param: param.QueueDepth, Option: "--queue-depth"},
	{Param: param.Pattern, Option: "--pattern"},
	{Param: param.Duration, Option: "--duration", Refuse: func(p Params) string {
		return refuseIf(p.Duration%time.Millisecond != 0 || p.Warmup%time.Millisecond != 0,
			"fio takes whole milliseconds (duration %s, warmup %s)", p.Duration, p.Warmup)
	}},
	{Param: param.Total, Option: "--total"},
	{Param: param.Warmup, Option: "--warmup"},
	{Param: param.Cache, Option: "--cache"},
	{Param: param.Port, Option: "--svcid"}, // 0: 4420
	{Param: param.Verify, Ignored: true},   // a sample is checked always
	{Param: param.Registration, Refuse: func(p Params) string {
		return refuseIf(p.Registration == "odp", "the kernel's target registers its own memory")
	}},
	{Param: param.QPs, Option: "--qps", Refuse: func(p Params) string {
		return refuseIf(p.FileSize > 0 && p.BlockSize > 0 && jobRange(p.FileSize, p.qps(), p.BlockSize) == 0,
			"qps %d: each I/O queue's fio job reads its own range of file_size %d, and a block of %d bytes does not fit in one", p.qps(), p.FileSize, p.BlockSize)
	}},
	{Param: param.Device, Ignored: true},
	{Param: param.IBPort, Ignored: true},
	{Param: param.GIDIndex, Ignored: true},
	{Param: param.MaxRdAtomic, Ignored: true},
}

func buildNVMeOF(p Params) Commands {
	port := p.Port
	if port == 0 {
		port = 4420 // NVMe over Fabrics' registered port
	}
	tr := p.Transport
	if tr == "" {
		tr = results.TransportRDMA
	}
	fabric := []string{"--transport", tr, "--addr", p.ServerAddr, "--svcid", strconv.Itoa(port), "--control-stdin"}
	cache := p.Cache
	if cache == "" {
		cache = "cold"
	}
	server := append([]string{NodeProgram, "nvmet"}, fabric...)
	server = append(server, "--file", p.File, "--file-size", strconv.FormatInt(p.FileSize, 10), "--create", "--cache", cache)
	client := append([]string{NodeProgram, "nvmeof-read"}, fabric...)
	client = append(client, "--block-size", strconv.FormatInt(p.BlockSize, 10), "--size", strconv.FormatInt(p.FileSize, 10),
		"--queue-depth", strconv.Itoa(max(p.QueueDepth, 1)))
	if p.qps() > 1 {
		client = append(client, "--qps", strconv.Itoa(p.qps()))
	}
	if p.Pattern == "random" {
		client = append(client, "--pattern", "random")
	}
	if p.Duration > 0 {
		client = append(client, "--duration", p.Duration.String())
	} else {
		client = append(client, "--total", strconv.FormatInt(p.total(), 10))
	}
	if p.Warmup > 0 {
		client = append(client, "--warmup", p.Warmup.String())
	}
	return Commands{Server: server, Client: client, ClientHost: "client", ReadyPort: port + 1, Control: true}
}

// parseNVMeOF reads node nvmeof-read's output: node's event lines (a
// warning such as the modules it loaded), its verified line, then fio's
// JSON.
func parseNVMeOF(b []byte) (Result, error) {
	for {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		var v struct {
			Type   string `json:"type"`
			Blocks int    `json:"blocks"`
		}
		if err := json.Unmarshal(line, &v); err != nil || v.Type == "" {
			return Result{}, fmt.Errorf("want node nvmeof-read's verified line before fio's report, got %.80q", line)
		}
		if v.Type != "nvmeof_verified" {
			b = rest // one of node's events
			continue
		}
		r, err := parseFio(rest)
		if err != nil {
			return Result{}, err
		}
		r.Verified = v.Blocks > 0
		return r, nil
	}
}
