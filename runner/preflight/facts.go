// Package preflight decides, before an exec, whether a plan can run on its
// hosts: it gathers each host's facts with one command and judges them
// against the plan, giving one table cell per check and a Problem, with a
// one-line hint, for everything that would make the plan fail.
//
// The data path and the RDMA probe need both roles at once and are run by
// the runner with node itself; this package only judges facts.
package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/remote"
)

// Facts are what one host says about itself.
type Facts struct {
	Arch, Kernel string
	UID          int    // -1 when unknown
	Memlock      string // `ulimit -l`: "unlimited" or KiB
	Node         NodeFacts
	Devices      []Device // from node devices --json
	// DevicesError is node's message when it could not list devices (a
	// node built without rdma, no libibverbs); "" otherwise.
	DevicesError string
	File         *FileFacts // the server's data file; nil for the client
}

// NodeFacts describe the node binary on the host.
type NodeFacts struct {
	Present    bool
	Version    string
	SHA256     string
	Transports []string
}

// FileFacts describe the server's data file and where it would live.
type FileFacts struct {
	Path        string
	Exists      bool
	Size        int64
	Sidecar     bool   // FILE + results.SidecarSuffix exists: node made the file
	DirExists   bool   // the file's directory exists
	DirWritable bool   // and this user may create files in it
	FSType      string // of the nearest existing directory (or the file)
	AvailBytes  int64  // free space there, -1 when unknown
	MeasuredAt  string // the path df looked at
}

// Device, Port and GID are node's own types for `node devices --json`.
type (
	Device = results.Device
	Port   = results.Port
	GID    = results.GID
)

// script prints "key<TAB>value" lines. $1 node path, $2 data file ("" for
// none), $3 the sidecar suffix. Everything is optional; only builtins and a few tools run.
const script = `node=$1 file=$2 sidecar=$3
say() { printf '%s\t%s\n' "$1" "$2"; }
say arch "$(uname -m 2>/dev/null)"
say kernel "$(uname -r 2>/dev/null)"
say uid "$(id -u 2>/dev/null)"
say memlock "$(ulimit -l 2>/dev/null)"
if [ -x "$node" ]; then
  say node_present yes
  say node_version "$("$node" version --json 2>/dev/null)"
  say node_devices "$("$node" devices --json 2>/dev/null | tail -n 1)"
  set -- $(sha256sum "$node" 2>/dev/null)
  say node_sha256 "$1"
fi
if [ -n "$file" ]; then
  if [ -e "$file" ]; then
    say file_exists yes
    say file_size "$(stat -L -c %s "$file" 2>/dev/null)"
  fi
  [ -e "$file$sidecar" ] && say sidecar yes
  dir=${file%/*}; [ -n "$dir" ] || dir=/
  if [ -d "$dir" ]; then
    say dir_exists yes
    [ -w "$dir" ] && say dir_writable yes
  fi
  p=$file
  while [ -n "$p" ] && [ ! -e "$p" ]; do p=${p%/*}; done
  [ -n "$p" ] || p=/
  say measured_at "$p"
  df -PTk "$p" 2>/dev/null | { read -r _ && read -r _ fstype _ _ avail _ && say fs_type "$fstype" && say avail_kib "$avail"; }
fi
`

// Collect gathers h's facts with one command. file is the server's data
// file, or "" for a client.
func Collect(ctx context.Context, h remote.Host, nodePath, file string) (Facts, error) {
	out, err := h.Run(ctx, []string{"sh", "-c", script, "sh", nodePath, file, results.SidecarSuffix})
	if err != nil {
		return Facts{}, fmt.Errorf("collect facts: %w", err)
	}
	f := parse(out)
	if f.File != nil || file != "" {
		if f.File == nil {
			f.File = &FileFacts{AvailBytes: -1}
		}
		f.File.Path = file
	}
	return f, nil
}

func parse(out []byte) Facts {
	f := Facts{UID: -1}
	var file *FileFacts
	fileOf := func() *FileFacts {
		if file == nil {
			file = &FileFacts{AvailBytes: -1}
		}
		return file
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "arch":
			f.Arch = v
		case "kernel":
			f.Kernel = v
		case "uid":
			if n, err := strconv.Atoi(v); err == nil {
				f.UID = n
			}
		case "memlock":
			f.Memlock = v
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
			default:
				f.DevicesError = d.Message
			}
		case "node_sha256":
			f.Node.SHA256 = v
		case "file_exists":
			fileOf().Exists = true
		case "file_size":
			fileOf().Size, _ = strconv.ParseInt(v, 10, 64)
		case "sidecar":
			fileOf().Sidecar = true
		case "dir_exists":
			fileOf().DirExists = true
		case "dir_writable":
			fileOf().DirWritable = true
		case "measured_at":
			fileOf().MeasuredAt = v
		case "fs_type":
			fileOf().FSType = v
		case "avail_kib":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				fileOf().AvailBytes = n * 1024
			}
		}
	}
	f.File = file
	return f
}
