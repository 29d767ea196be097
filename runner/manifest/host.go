package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/remote"
)

// Query says what to collect on one host.
type Query struct {
	Role     string // "server" or "client"
	NodePath string // absolute path of node on the host
	File     string // the server's data file; "" for the client
	CPUs     string // the role's pinning, recorded as given
	// Sysroot prefixes /proc and /sys, so tests can point the script at
	// a fake tree; "" on real hosts.
	Sysroot string
}

// script prints the host's facts as "key<TAB>value" lines, plus "nic" and
// "gid" lines with several fields. It reads files with the read builtin
// and spends forks only on what has no file (uname, df, lsblk, node,
// sha256sum). Anything missing prints an empty value or nothing.
// $1 sysroot, $2 node path, $3 data file ("" for none).
const script = `S=$1 node=$2 file=$3
say() { printf '%s\t%s\n' "$1" "$2"; }
get() { v=; { IFS= read -r v <"$1"; } 2>/dev/null || :; }
get "$S/proc/sys/kernel/hostname"; say hostname "$v"
get "$S/proc/sys/kernel/osrelease"; say kernel "$v"
say arch "$(uname -m 2>/dev/null)"
if [ -r "$S/proc/cpuinfo" ]; then
  while IFS=: read -r k val; do
    case $k in "model name"*|"cpu model"*|"Model"*) say cpu_model "${val# }"; break;; esac
  done <"$S/proc/cpuinfo"
fi
get "$S/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"; say cpu_governor "$v"
for d in "$S"/sys/class/infiniband/*; do
  [ -e "$d" ] || continue
  n=${d##*/}
  get "$d/fw_ver"; fw=$v
  get "$d/device/numa_node"; numa=$v
  for p in "$d"/ports/*; do
    [ -e "$p" ] || continue
    pn=${p##*/}
    get "$p/rate"; rate=$v
    get "$p/link_layer"; ll=$v
    get "$p/state"; st=$v
    get "$p/gid_attrs/ndevs/0"; nd=$v
    mtu= pnuma=$numa
    if [ -n "$nd" ]; then
      get "$S/sys/class/net/$nd/mtu"; mtu=$v
      if [ -z "$pnuma" ]; then get "$S/sys/class/net/$nd/device/numa_node"; pnuma=$v; fi
    fi
    printf 'nic\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$pn" "$fw" "$rate" "$ll" "$st" "$nd" "$mtu" "$pnuma"
    for g in "$p"/gid_attrs/types/*; do
      [ -e "$g" ] || continue
      i=${g##*/}
      get "$g"; t=$v
      [ -n "$t" ] || continue
      get "$p/gids/$i"; gid=$v
      case $gid in ""|0000:0000:0000:0000:0000:0000:0000:0000) continue;; esac
      printf 'gid\t%s\t%s\t%s\t%s\t%s\n' "$n" "$pn" "$i" "$t" "$gid"
    done
  done
done
if [ -n "$file" ]; then
  if [ -e "$file" ]; then say file_exists yes; else say file_exists no; fi
  p=$file
  while [ -n "$p" ] && [ ! -e "$p" ]; do p=${p%/*}; done
  [ -n "$p" ] || p=/
  df -PT "$p" 2>/dev/null | {
    read -r _ || exit 0
    read -r dev fstype _ || exit 0
    say fs_device "$dev"; say fs_type "$fstype"
    case $dev in
    /dev/*)
      lsblk -nlso TYPE,NAME,MODEL "$dev" 2>/dev/null | while read -r typ name model; do
        [ "$typ" = disk ] || continue
        say block_device "$name"; say block_model "$model"
        get "$S/sys/class/block/$name/device/numa_node"
        [ -n "$v" ] || get "$S/sys/class/block/$name/device/device/numa_node"
        say block_numa "$v"
        break
      done;;
    esac
  }
fi
if [ -x "$node" ]; then
  say node_version "$("$node" version --json 2>/dev/null)"
  say node_devices "$("$node" devices --json 2>/dev/null)"
  set -- $(sha256sum "$node" 2>/dev/null)
  say node_sha256 "$1"
fi
`

// Collect gathers one host's facts with a single command on h.
func Collect(ctx context.Context, h remote.Host, q Query) (Host, error) {
	out, err := h.Run(ctx, []string{"sh", "-c", script, "sh", q.Sysroot, q.NodePath, q.File})
	if err != nil {
		return Host{}, fmt.Errorf("collect facts: %w", err)
	}
	host := parse(out)
	host.Role, host.Name, host.CPUs = q.Role, h.Name(), q.CPUs
	host.Node.Path = q.NodePath
	if host.File != nil {
		host.File.Path = q.File
	}
	return host, nil
}

// parse reads the script's output. Unknown lines are ignored, so an older
// runner reads a newer script's output.
func parse(out []byte) Host {
	var h Host
	var file File
	hasFile := false
	var devices results.DevicesList
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			continue
		}
		v := strings.TrimSpace(f[1])
		switch f[0] {
		case "hostname":
			h.Hostname = v
		case "kernel":
			h.Kernel = v
		case "arch":
			h.Arch = v
		case "cpu_model":
			h.CPUModel = v
		case "cpu_governor":
			h.CPUGovernor = v
		case "nic":
			if len(f) < 10 {
				continue
			}
			port, _ := strconv.Atoi(f[2])
			mtu, _ := strconv.Atoi(f[8])
			h.NICs = append(h.NICs, NIC{
				Device: f[1], Port: port, Firmware: f[3], Rate: f[4], LinkLayer: f[5],
				State: f[6], Netdev: f[7], NetdevMTU: mtu, NUMANode: numa(f[9]), GIDs: []GID{},
			})
		case "gid":
			if len(f) < 6 {
				continue
			}
			port, _ := strconv.Atoi(f[2])
			idx, err := strconv.Atoi(f[3])
			if err != nil {
				continue
			}
			for i := range h.NICs {
				if h.NICs[i].Device == f[1] && h.NICs[i].Port == port {
					h.NICs[i].GIDs = append(h.NICs[i].GIDs, GID{Index: idx, Type: f[4], GID: f[5]})
				}
			}
		case "file_exists":
			hasFile, file.Exists = true, v == "yes"
		case "fs_device":
			file.FSDevice = v
		case "fs_type":
			file.FSType = v
		case "block_device":
			file.BlockDevice = v
		case "block_model":
			file.Model = v
		case "block_numa":
			file.NUMANode = numa(v)
		case "node_version":
			var ver results.Version
			if json.Unmarshal([]byte(v), &ver) == nil {
				h.Node.Version = ver.Version
			}
		case "node_devices":
			_ = json.Unmarshal([]byte(v), &devices)
		case "node_sha256":
			h.Node.SHA256 = v
		}
	}
	// node's view of the port adds the active MTU, which sysfs lacks.
	if devices.Type == results.TypeDevices {
		for _, d := range devices.Devices {
			for _, p := range d.Ports {
				for i := range h.NICs {
					if h.NICs[i].Device == d.Name && h.NICs[i].Port == p.Port {
						h.NICs[i].ActiveMTU = p.ActiveMTU
					}
				}
			}
		}
	}
	if h.NICs == nil {
		h.NICs = []NIC{}
	}
	if hasFile {
		h.File = &file
	}
	return h
}

func numa(s string) *int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return &n
}
