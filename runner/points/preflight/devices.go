package preflight

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
)

// Unfit says why device d cannot carry node's connection made with
// rdma.connect connect, or nil when it can. It is the one rule for both
// commands: check judges every role by it (Judge), and exec refuses by it
// before any point runs (CheckDevices).
func Unfit(d Device, connect string) *Problem {
	if d.Transport == "iWARP" && connect != "cm" {
		return &Problem{Check: results.TransportRDMA, Msg: fmt.Sprintf("%s is an iWARP device, which connects only through rdma_cm", d.Name), Hint: "set rdma.connect: cm"}
	}
	return nil
}

// ErrUnfit is matched (errors.Is) by CheckDevices' refusal: the plan asks
// of a host's device what it cannot do, so no point of it would run.
var ErrUnfit = errors.New("the plan's transport cannot run on the host's device")

// UnfitError is a refusal of exec's points on one role's device.
type UnfitError struct {
	Label  string // "client (b)"
	Device string
	Points int // how many of the points to run it refuses
	Problem
}

func (e *UnfitError) Error() string {
	s := "s"
	if e.Points == 1 {
		s = ""
	}
	return fmt.Sprintf("%s: %s: refusing to run %d point%s on it", e.Label, e.Msg, e.Points, s)
}

func (e *UnfitError) Is(target error) bool { return target == ErrUnfit }
func (e *UnfitError) Hint() string         { return e.Problem.Hint }

// CheckDevices refuses an exec, before any point, when a point to run
// needs of a role's RDMA device what Unfit says it cannot do. It asks
// node on each role's host which device that role's connection would use,
// as check does; a role whose device cannot be told is left to the point.
// What node chose is returned by role name (a role without a choice has
// none), so a peer can be run on the same device, port and GID as node
// (peer.Params.Chosen).
func CheckDevices(ctx context.Context, p *plan.Plan, pts []plan.Point, s *hostset.Set) (map[string]results.DeviceChoice, error) {
	var rdma []plan.Point
	for _, pt := range pts {
		if pt.Values.Str(param.Transport) == results.TransportRDMA {
			rdma = append(rdma, pt)
		}
	}
	if len(rdma) == 0 {
		return nil, nil
	}
	needs := Needs(p, rdma, nil)
	chosen := make([]*results.DeviceChoice, len(s.Roles))
	err := s.EachRole(func(i int, t role.Target) error {
		f, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{NodePath: t.NodePath, Devices: DevicesArgs(p, needs[i])})
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		if err := Refusal(t.Label, f, needs[i], rdma); err != nil {
			return err
		}
		chosen[i] = f.Choice
		return nil
	})
	if err != nil {
		return nil, err
	}
	choices := map[string]results.DeviceChoice{}
	for i, c := range chosen {
		if c != nil {
			choices[s.Roles[i].Role] = *c
		}
	}
	return choices, nil
}

// Refusal is CheckDevices' judgement of one role, labelled label, from
// its host's facts f and what the plan needs of it: the points of pts
// that the role's device cannot run, as an *UnfitError, or nil.
func Refusal(label string, f Facts, n Need, pts []plan.Point) *UnfitError {
	d := usedDevice(f, n)
	if d == nil {
		return nil
	}
	var refused *UnfitError
	for _, pt := range pts {
		if pt.Values.Str(param.Transport) != results.TransportRDMA {
			continue
		}
		pr := Unfit(*d, pt.Values.Str(param.Connect))
		if pr == nil {
			continue
		}
		if refused == nil {
			refused = &UnfitError{Label: label, Device: d.Name, Problem: *pr}
		}
		refused.Points++
	}
	return refused
}

// usedDevice is the device a role's connection uses, as Judge finds it:
// node's own choice, else the plan's device or the first; nil when the
// facts do not say.
func usedDevice(f Facts, n Need) *Device {
	if f.ChoiceError != "" {
		return nil
	}
	name := n.Device
	if f.Choice != nil {
		name = f.Choice.Device
	}
	for i := range f.Devices {
		if name == "" || f.Devices[i].Name == name {
			return &f.Devices[i]
		}
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
	if p.Transport() != results.TransportRDMA || n.DataAddress == "" {
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
