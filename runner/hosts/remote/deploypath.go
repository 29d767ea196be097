package remote

// A deployed node is run only from a path no other user can change, and
// only when the file is the one the runner uploaded. On a shared host
// other local users are untrusted: a file they own, or one in a
// directory they can write, can be swapped for any program between the
// upload and an exec, and the swap would run as the runner's user. So
// before every exec of a deployed file, and around every upload, one
// shell script (guardScript) checks, first by path, by lstat of the file
// and its directory and stat of every directory above them:
//
//   - the file is a regular file owned by the login user, and not
//     writable by group or others;
//   - its directory is a real directory (not a symlink) owned by the
//     login user, and not writable by group or others;
//   - every directory above is owned by root or the login user, and not
//     writable by group or others, unless it is root's and sticky (/tmp,
//     /var/tmp): there no one else may rename or remove our entry.
//
// These are OpenSSH's StrictModes rules for authorized_keys, with sticky
// root directories allowed. They are a first filter, which names what is
// wrong: a path is resolved again at every test, so another user who
// owns an entry on it (one made in /var/tmp before ours, and followed as
// a symlink where fs.protected_symlinks is 0) can flip it between two
// tests and the exec. What decides is done once, on a descriptor: the
// script opens the directory as fd 4, and checks that what it opened is
// a directory of the login user's that group and others may not write,
// and that "$d" still names it (same device and inode, and no link).
// From there every look at the file goes through /proc/self/fd/4, which
// no rename elsewhere changes, and in that directory only the login user
// or root can change an entry: the file is checked again there (a
// regular file, the user's, not group- or other-writable) and hashed
// (unless it is the inode the upload's check hashed, unchanged since:
// see Deployed), and refused unless its sha256 is the one the runner
// uploaded. The command then runs it as /proc/self/fd/4/NAME (every
// argument that names the file is replaced by that path), so what is
// executed is what was hashed, and no byte of any other file runs. The
// script also exports the sha256 as NodeSHA256Env, which node checks
// against its own executable before it does anything
// (node/selfcheck.go): a second check, for a guard that did not run.
//
// A shell cannot open a file without following a link (sh has no
// O_NOFOLLOW): hence the directory's descriptor and the test that its
// entry is no link. A host without /proc cannot run a guarded node at
// all (the exec of /proc/self/fd/4/NAME fails); there is no fallback to
// the path.

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"rdmasweep/results"
)

// NodeSHA256Env is the environment variable through which the guard
// hands node its expected sha256.
const NodeSHA256Env = results.NodeSHA256Env

// guardName is $0 of the guard script, which also marks an argv that is
// already guarded.
const guardName = "rdmasweep-guard"

// refuseMarker starts the line on stderr by which the guard refuses.
const refuseMarker = "rdmasweep-refuse"

// guardScript checks $2 as said above. $1 is what to do:
//
//   - "file": check $2 and its directory, refuse unless $2's sha256 is
//     $3 (when $3 is not empty), then export it and exec the rest, every
//     argument that is $2 replaced by $2's path through fd 4. $3 may be
//     "SHA256 SIG", SIG what "sum" printed beside the sha256: when the
//     file's SIG is still that, it is not hashed again (see Deployed);
//   - "sum": make $2's directory (0700) if it is missing, check it, and
//     print $2's sha256 and its SIG (device:inode:size:ctime, taken
//     before the hash), or "-" when there is no file or one the checks
//     refuse (an upload will replace it: the directory is ours);
//   - "look": as "sum", but a missing directory is "-" (nothing is
//     made), and a file the checks refuse is refused;
//   - "rm": as "look", then remove the file through fd 4.
//
// A refusal is one line on stderr: the marker, the path, its owner, its
// mode and why, tab-separated, and exit 126 ("cannot execute", as a
// shell gives for a file it may not run). Only stat (twice) and
// sha256sum fork.
const guardScript = `what=$1 f=$2 sum=$3 sig=; shift 3
case $sum in *" "*) sig=${sum#* } sum=${sum%% *} ;; esac
refuse() { printf '` + refuseMarker + `\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >&2; exit 126; }
d=${f%/*}; [ -n "$d" ] || d=/
b=${f##*/}
if [ ! -e "$d" ] && [ ! -h "$d" ]; then
  case $what in
  sum) mkdir -p -m 0700 -- "$d" 2>/dev/null ;;
  look|rm) echo -; exit 0 ;;
  esac
fi
[ -h "$d" ] && refuse "$d" "" "" "it is a symbolic link"
bad=
if [ -h "$f" ]; then bad="it is a symbolic link"
elif [ ! -e "$f" ]; then
  [ "$what" = file ] && refuse "$f" "" "" "it is missing"
  bad="it is missing"
fi
paths() {
  if [ -n "$bad" ]; then set --; else set -- "$f"; fi
  p=$d
  while :; do
    set -- "$@" "$p"
    [ "$p" = / ] && break
    p=${p%/*}; [ -n "$p" ] || p=/
  done
  LC_ALL=C stat -L -c '%u %a %U %A %n' -- "$@"
}
out=$(paths 2>/dev/null) || refuse "$f" "" "" "stat cannot read it or a directory above it"
i=0 me=
[ -n "$bad" ] && i=1
while read -r u a user mode n; do
  m=$((0$a))
  if [ $i -eq 0 ]; then
    case $mode in -*) ;; *) bad="it is not a regular file" ;; esac
    [ -O "$n" ] || bad="another user owns it"
    [ $((m & 18)) -eq 0 ] || bad="group or others may write it"
    [ -z "$bad" ] || fu=$user fm=$mode
  elif [ $i -eq 1 ]; then
    case $mode in d*) ;; *) refuse "$n" "$user" "$mode" "it is not a directory" ;; esac
    [ -O "$n" ] || refuse "$n" "$user" "$mode" "another user owns it"
    [ $((m & 18)) -eq 0 ] || refuse "$n" "$user" "$mode" "group or others may write it"
    me=$u
  else
    [ "$u" = "$me" ] || [ "$u" = 0 ] || refuse "$n" "$user" "$mode" "another user owns it, and it is above the node's directory"
    if [ $((m & 18)) -ne 0 ] && { [ "$u" != 0 ] || [ $((m & 512)) -eq 0 ]; }; then
      refuse "$n" "$user" "$mode" "group or others may write it, and it is not a sticky directory of root's"
    fi
  fi
  i=$((i + 1))
done <<EOF
$out
EOF
if [ -n "$bad" ]; then
  case $what in
  sum) echo -; exit 0 ;;
  look) [ "$bad" = "it is missing" ] && { echo -; exit 0; } ;;
  rm) [ "$bad" = "it is missing" ] && exit 0 ;;
  esac
  refuse "$f" "$fu" "$fm" "$bad"
fi
# Once: the directory as fd 4, and from now on nothing by its path.
{ command exec 4<"$d"; } 2>/dev/null || refuse "$d" "" "" "it cannot be opened"
p=/proc/self/fd/4
out=$(LC_ALL=C stat -c '%d:%i %u %a %U %A %d:%i:%s:%.9Z' -- "$p/." "$d" "$p/$b" 2>/dev/null) || refuse "$f" "" "" "it changed while it was checked"
{ read -r di x a user mode x; read -r ei x x x em x; read -r x x fa fuser fm fsig; } <<EOF
$out
EOF
case $em in d*) [ "$di" = "$ei" ] ;; *) false ;; esac || refuse "$d" "$user" "$mode" "it changed while it was checked"
[ -O "$p/." ] || refuse "$d" "$user" "$mode" "another user owns it"
[ $((0$a & 18)) -eq 0 ] || refuse "$d" "$user" "$mode" "group or others may write it"
case $fm in -*) ;; *) refuse "$f" "$fuser" "$fm" "it is not a regular file" ;; esac
[ -O "$p/$b" ] || refuse "$f" "$fuser" "$fm" "another user owns it"
[ $((0$fa & 18)) -eq 0 ] || refuse "$f" "$fuser" "$fm" "group or others may write it"
[ "$what" = rm ] && exec rm -f -- "$p/$b"
if [ -n "$sig" ] && [ "$sig" = "$fsig" ]; then
  h=$sum
else
  h=$(sha256sum < "$p/$b") || refuse "$f" "$fuser" "$fm" "sha256sum cannot read it"
  h=${h%% *}
fi
case $what in sum|look) echo "$h $fsig"; exit 0 ;; esac
[ -z "$sum" ] || [ "$h" = "$sum" ] || refuse "$f" "$fuser" "$fm" "it is not the node the runner deployed (its sha256 is $h, the runner's $sum)"
[ -z "$sum" ] || export ` + NodeSHA256Env + `="$sum"
for a do
  shift
  [ "$a" = "$f" ] && a=$p/$b
  set -- "$@" "$a"
done
exec "$@"`

// guardArgv wraps argv, which runs (or names) the deployed file at
// file, so the file is checked before argv runs, and node is told sum.
func guardArgv(file, sum string, argv []string) []string {
	return append([]string{"/bin/sh", "-c", guardScript, guardName, "file", file, sum}, argv...)
}

// GuardSumArgv is a command that makes file's directory 0700 when it is
// missing, checks it as a deployed file's, and prints file's sha256 and
// signature (see Deployed), or "-" when file is missing or one that may
// not be run; or it refuses (see ParseRefusal).
func GuardSumArgv(file string) []string {
	return []string{"/bin/sh", "-c", guardScript, guardName, "sum", file, ""}
}

// GuardLookArgv is a command that checks file, and its directory, as a
// deployed file's and prints its sha256, or "-" when file or its
// directory is missing; or it refuses (see ParseRefusal). It makes
// nothing.
func GuardLookArgv(file string) []string {
	return []string{"/bin/sh", "-c", guardScript, guardName, "look", file, ""}
}

// GuardRemoveArgv is a command that checks file as GuardLookArgv does
// and removes it through the directory it checked, or refuses. A missing
// file or directory is nothing to remove.
func GuardRemoveArgv(file string) []string {
	return []string{"/bin/sh", "-c", guardScript, guardName, "rm", file, ""}
}

// GuardExecArgv is argv, which runs (or names) file, as the guard runs
// it: file and its directory checked, its sha256 compared with sum
// before any of it runs, and every argument that is file replaced by the
// checked file's path through the guard's descriptor. A Host given it
// runs it as it is (Guard leaves a guarded argv alone), so a caller that
// knows a file's sha256 without having uploaded it (clean, which deploys
// nothing) runs it guarded all the same.
func GuardExecArgv(file, sum string, argv []string) []string {
	return guardArgv(file, sum, argv)
}

// Guard wraps argv so that, when it names a file in deployed (a path and
// its sha256) anywhere, the file is checked as above before argv runs.
// An argv that names none, or is guarded already, is returned as is.
// Hosts apply it to every Run and Start, so no caller can exec a
// deployed node unchecked.
func Guard(deployed map[string]string, argv []string) []string {
	if len(deployed) == 0 || len(argv) > 3 && argv[3] == guardName {
		return argv
	}
	for _, a := range argv {
		if sum, ok := deployed[a]; ok {
			return guardArgv(a, sum, argv)
		}
	}
	return argv
}

// UnsafePathError is a deployed file, or its directory, that the guard
// refused: another user owns it, or could change it.
type UnsafePathError struct {
	Path  string
	Owner string // "" when unknown
	Mode  string // ls -l style; "" when unknown
	Why   string
}

func (e *UnsafePathError) Error() string {
	s := "refusing " + e.Path
	if e.Owner != "" || e.Mode != "" {
		s += fmt.Sprintf(" (owner %s, mode %s)", e.Owner, e.Mode)
	}
	return s + ": " + e.Why
}

// Hint says what to do.
func (e *UnsafePathError) Hint() string {
	if e.Owner == "root" && strings.HasPrefix(e.Mode, "d") {
		return fmt.Sprintf("%s is shared, not yours: set node.remote_path to a directory of your own, e.g. %s/$USER/node (the runner makes it 0700), or leave the default /var/tmp/rdmasweep-UID/node; docs/ssh.md#deploy-path", e.Path, e.Path)
	}
	if strings.Contains(e.Why, "another user") {
		return fmt.Sprintf("do not run anything from %s: another user could swap it; have it removed as root (or by %s), or set node.remote_path to a path under a directory only you can write (the default is /var/tmp/rdmasweep-UID/node); docs/ssh.md#deploy-path", e.Path, e.Owner)
	}
	if strings.Contains(e.Why, "may write") {
		return fmt.Sprintf("make %s writable by its owner only (chmod go-w), or set node.remote_path elsewhere; docs/ssh.md#deploy-path", e.Path)
	}
	return fmt.Sprintf("remove %s, or set node.remote_path to a path under a directory only you can write; docs/ssh.md#deploy-path", e.Path)
}

// ParseRefusal finds the guard's refusal in a command's stderr, or
// returns nil.
func ParseRefusal(stderr []byte) *UnsafePathError {
	for _, line := range strings.Split(string(stderr), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 5 && f[0] == refuseMarker {
			return &UnsafePathError{Path: f[1], Owner: f[2], Mode: f[3], Why: f[4]}
		}
	}
	return nil
}

// Refusal is refusal for Host implementations outside this package.
func Refusal(err error) error { return refusal(err) }

// refusal turns a Run's *ExitError with the guard's refusal into an
// *UnsafePathError; any other err is returned as is. The status is not
// looked at: a Slurm step of several tasks may end with the signal that
// stopped the others when one refused.
func refusal(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		if r := ParseRefusal(ee.Stderr); r != nil {
			return r
		}
	}
	return err
}

// Deployed are the files a Host uploaded, by path, with their sha256
// and, when one host's file, its signature: device, inode, size and
// ctime (to the nanosecond) as the guard saw them before it hashed the
// file. While a start finds the same signature the guard does not hash
// the file again (sha256sum of node costs some 20 ms of CPU a start): the
// same inode whose ctime has not moved holds the same bytes, since any
// write or rename onto it moves the ctime, and in a directory only the
// login user and root can change. Any other inode, in another directory
// too, is hashed. The zero value is ready to use.
type Deployed struct {
	mu sync.Mutex
	m  map[string]string
}

// Add records path's sha256 after an upload.
func (d *Deployed) Add(path, sum string) { d.AddChecked(path, sum, "") }

// AddChecked records path's sha256 and its signature as the guard's sum
// printed them after an upload; sig "" is none (every start hashes).
func (d *Deployed) AddChecked(path, sum, sig string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]string{}
	}
	if sig != "" && !strings.ContainsAny(sig, " \t\n") {
		sum += " " + sig
	}
	d.m[path] = sum
}

// Guard is the package Guard with these files.
func (d *Deployed) Guard(argv []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Guard(d.m, argv)
}
