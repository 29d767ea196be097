package main

import (
	"flag"
	"time"

	"rdmasweep/node/transport"
)

const defaultAccept = time.Minute

// durationFlag is a time.Duration flag whose default can be set before
// registration without a pointer dance.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(v string) error {
	x, err := time.ParseDuration(v)
	*d = durationFlag(x)
	return err
}

func (d durationFlag) d() time.Duration { return time.Duration(d) }

// addRDMAFlags registers the RDMA flags; tcp accepts and ignores them, so
// the runner can build one argv for both.
func addRDMAFlags(fs *flag.FlagSet, r *transport.RDMA) {
	fs.StringVar(&r.Device, "rdma-device", "", "RDMA device (default: the first active one)")
	fs.IntVar(&r.IBPort, "ib-port", 1, "RDMA port, 1-based")
	fs.IntVar(&r.GIDIndex, "gid-index", -1, "GID index (-1: pick from the address in use)")
}

func checkFormat(f string) error {
	if f != "json" && f != "text" {
		return usagef("--format must be json or text (got %q)", f)
	}
	return nil
}
