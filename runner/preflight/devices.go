package preflight

import (
	"fmt"
	"strconv"

	"rdmasweep/plan"
)

// Unfit says why device d cannot carry node's connection made with
// rdma.connect connect, or nil when it can; check judges every role by it
// (Judge).
func Unfit(d Device, connect string) *Problem {
	if d.Transport == "iWARP" && connect != "cm" {
		return &Problem{Check: "rdma", Msg: fmt.Sprintf("%s is an iWARP device, which connects only through rdma_cm", d.Name), Hint: "set rdma.connect: cm"}
	}
	return nil
}

// DevicesArgs asks node devices, on an rdma plan, which device, port and
// GID the role's connection would use, with the plan's device, ib_port
// and gid_index: over the source address the kernel picks to reach the
// server's data address, which on a client is what node read uses and on
// the server is that address itself (the one node serve listens on; a
// name is resolved as serve resolves it).
func DevicesArgs(p *plan.Plan, n Need) []string {
	if p.Transport() != "rdma" || n.DataAddress == "" {
		return nil
	}
	args := []string{"--route-to", n.DataAddress}
	if n.Device != "" {
		args = append(args, "--rdma-device", n.Device)
	}
	if n.IBPort > 0 {
		args = append(args, "--ib-port", strconv.Itoa(n.IBPort))
	}
	if n.GIDIndex != nil {
		args = append(args, "--gid-index", strconv.Itoa(*n.GIDIndex))
	}
	return args
}
