package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// qmpPath is the guest's QMP socket, qemu's machine protocol, through
// which a test changes what it booted with (SetNVMeReadBPS).
func (g *Guest) qmpPath() string { return filepath.Join(g.tmp, "qmp.sock") }

// SetNVMeReadBPS throttles the NVMe drive's reads to bps bytes a second
// from now on (0: no throttle), as Options.NVMeReadBPS does at boot, so a
// test can slow the drive for one point and give it back after: qemu's
// block_set_io_throttle on the drive, through QMP.
func (g *Guest) SetNVMeReadBPS(ctx context.Context, bps int64) error {
	err := g.qmp(ctx, "block_set_io_throttle", map[string]any{
		"device": "nv0", "bps": 0, "bps_rd": bps, "bps_wr": 0, "iops": 0, "iops_rd": 0, "iops_wr": 0,
	})
	if err != nil {
		return fmt.Errorf("throttle the guest's NVMe drive to %d B/s: %w", bps, err)
	}
	return nil
}

// qmp runs one QMP command on a connection of its own and returns its
// error, if qemu answered one.
func (g *Guest) qmp(ctx context.Context, command string, args map[string]any) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", g.qmpPath())
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	r := bufio.NewReader(c)
	if _, err := r.ReadBytes('\n'); err != nil { // the greeting
		return fmt.Errorf("read qmp greeting: %w", err)
	}
	enc := json.NewEncoder(c)
	for _, m := range []map[string]any{{"execute": "qmp_capabilities"}, {"execute": command, "arguments": args}} {
		if err := enc.Encode(m); err != nil {
			return err
		}
		if err := qmpReply(r); err != nil {
			return fmt.Errorf("%s: %w", m["execute"], err)
		}
	}
	return nil
}

// qmpReply reads up to the reply to the command just sent, past any
// event qemu sends first, and returns the error it carries.
func qmpReply(r *bufio.Reader) error {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("read qmp reply: %w", err)
		}
		var m struct {
			Event  string          `json:"event"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("qmp reply %q: %w", line, err)
		}
		switch {
		case m.Event != "":
			continue
		case m.Error != nil:
			return fmt.Errorf("%s: %s", m.Error.Class, m.Error.Desc)
		default:
			return nil
		}
	}
}
