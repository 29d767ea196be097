package hostfacts

// script is the one command Collect runs on a host, as /bin/sh -c with
// $1 sysroot ("" on hosts), $2 node's path ("" for none), $3 the data
// file ("" for none), $4 the sidecar suffix, and after them the extra
// arguments of node devices (Query.Devices). Its rules:
//
//   - It prints "key<TAB>value" lines, plus "nic" and "gid" lines with
//     several fields. Its first line is the marker, so a run without it
//     means no shell ran the script; its last command is exit 0.
//   - Every fact is optional: a missing file, tool or device prints an
//     empty value or nothing, never an error.
//   - Forks cost ~25 ms each in a TCG guest, and sessions of real hosts
//     pay them too: files are read with the read builtin (uid and memlock
//     come from /proc/self, the shell's own, which node would inherit),
//     and only what has no file forks: uname -m, node, sha256sum, stat,
//     df and lsblk.
const script = `S=$1 node=$2 file=$3 sidecar=$4
shift 4
nl='
'
say() { printf '%s\t%s\n' "$1" "$2"; }
get() { v=; { IFS= read -r v <"$1"; } 2>/dev/null || :; }
say ` + marker + ` 1
get "$S/proc/sys/kernel/hostname"; say hostname "$v"
get "$S/proc/sys/kernel/osrelease"; say kernel "$v"
say arch "$(uname -m 2>/dev/null)"
{
  while read -r k _ e _; do
    case $k in Uid:) say uid "$e"; break;; esac
  done <"$S/proc/self/status"
} 2>/dev/null
{
  while read -r a b c soft _; do
    case "$a $b $c" in "Max locked memory") say memlock_bytes "$soft"; break;; esac
  done <"$S/proc/self/limits"
} 2>/dev/null
if [ -r "$S/proc/cpuinfo" ]; then
  while IFS=: read -r k val; do
    case $k in "model name"*|"cpu model"*|"Model"*) say cpu_model "${val# }"; break;; esac
  done <"$S/proc/cpuinfo"
fi
c=$S/sys/devices/system/cpu/cpu0/cpufreq
get "$c/scaling_governor"; say cpu_governor "$v"
get "$c/scaling_driver"; say cpufreq_driver "$v"
get "$c/scaling_min_freq"; say cpufreq_min_khz "$v"
get "$c/scaling_max_freq"; say cpufreq_max_khz "$v"
get "$c/cpuinfo_max_freq"; say cpufreq_hw_max_khz "$v"
get "$S/sys/kernel/mm/transparent_hugepage/enabled"; say thp_enabled "$v"
get "$S/sys/kernel/mm/transparent_hugepage/defrag"; say thp_defrag "$v"
get "$S/proc/cmdline"; say cmdline "$v"
# A network device on PCIe: its link, NUMA node and the affinity of its
# MSI IRQs (its queues'), one line per RDMA device or interface.
here=$PWD
for d in "$S"/sys/class/infiniband/* "$S"/sys/class/net/*; do
  [ -e "$d/device/current_link_speed" ] || continue
  cd -P "$d/device" 2>/dev/null || continue
  addr=${PWD##*/}; cd "$here" 2>/dev/null || cd /
  get "$d/device/current_link_speed"; cs=$v
  get "$d/device/current_link_width"; cw=$v
  get "$d/device/max_link_speed"; ms=$v
  get "$d/device/max_link_width"; mw=$v
  get "$d/device/numa_node"; dn=$v
  irqs=
  for i in "$d"/device/msi_irqs/*; do
    [ -e "$i" ] || continue
    get "$S/proc/irq/${i##*/}/smp_affinity_list"; irqs="$irqs ${v:-?}"
  done
  printf 'pcie\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${d##*/}" "$addr" "$cs" "$cw" "$ms" "$mw" "$dn" "${irqs# }"
done
for d in "$S"/sys/devices/system/node/node[0-9]*; do
  [ -e "$d/cpulist" ] || continue
  get "$d/cpulist"; printf 'numa_cpus\t%s\t%s\n' "${d##*node}" "$v"
done
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
if [ -n "$node" ] && [ -x "$node" ]; then
  say node_present yes
  v=$("$node" version --json 2>/dev/null); say node_version "${v##*"$nl"}"
  v=$("$node" devices --json "$@" 2>/dev/null); say node_devices "${v##*"$nl"}"
  v=$("$node" host --json 2>/dev/null); say node_host "${v##*"$nl"}"
  set -- $(sha256sum "$node" 2>/dev/null)
  say node_sha256 "$1"
fi
if [ -n "$file" ]; then
  if [ -e "$file" ]; then
    say file_exists yes
    say file_size "$(stat -L -c %s "$file" 2>/dev/null)"
  else
    say file_exists no
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
  df -PTk "$p" 2>/dev/null | {
    read -r _ || exit 0
    read -r dev fstype _ _ avail _ || exit 0
    say fs_device "$dev"; say fs_type "$fstype"; say avail_kib "$avail"
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
exit 0
`
