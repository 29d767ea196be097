package remote

// A deployed node is run only from a path no other user can change. On a
// shared host other local users are untrusted: a file they own, or one in
// a directory they can write, can be swapped for any program between the
// upload and an exec, and the swap would run as the runner's user. So
// before every exec of a deployed file, and around every upload, one
// shell script (guardScript) checks, by lstat of the file and its
// directory and stat of every directory above them:
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
// root directories allowed. Once they hold, only the login user and root
// can change the file, so checking then exec'ing has no window another
// user can use. The script then exports the file's expected sha256 as
// NodeSHA256Env, which node checks against its own executable before it
// does anything (node/selfcheck.go): that catches the login user's own
// replacement of the file, which these rules cannot.

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

// guardScript checks $2 as said above. $1 is "file": check $2 and its
// directory, then export $3 as the sha256 and exec the rest; or "sum":
// make $2's directory (0700) if it is missing, check it, and print $2's
// sha256sum line, or "-" when there is no file or one the checks refuse
// (an upload will replace it: the directory is ours). A refusal is one
// line on stderr: the marker, the path, its owner, its mode and why,
// tab-separated, and exit 126 ("cannot execute", as a shell gives for a
// file it may not run). Only stat (once) and sha256sum fork.
const guardScript = `what=$1 f=$2 sum=$3; shift 3
refuse() { printf '` + refuseMarker + `\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >&2; exit 126; }
d=${f%/*}; [ -n "$d" ] || d=/
if [ "$what" = sum ] && [ ! -e "$d" ] && [ ! -h "$d" ]; then
  mkdir -p -m 0700 -- "$d" 2>/dev/null
fi
[ -h "$d" ] && refuse "$d" "" "" "it is a symbolic link"
bad=
if [ -h "$f" ]; then bad="it is a symbolic link"
elif [ ! -e "$f" ]; then
  [ "$what" = sum ] || refuse "$f" "" "" "it is missing"
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
if [ "$what" = sum ]; then
  if [ -n "$bad" ]; then echo -; else sha256sum < "$f"; fi
  exit
fi
[ -z "$bad" ] || refuse "$f" "$fu" "$fm" "$bad"
[ -z "$sum" ] || export ` + NodeSHA256Env + `="$sum"
exec "$@"`

// guardArgv wraps argv, which runs (or names) the deployed file at
// file, so the file is checked before argv runs, and node is told sum.
func guardArgv(file, sum string, argv []string) []string {
	return append([]string{"/bin/sh", "-c", guardScript, guardName, "file", file, sum}, argv...)
}

// GuardSumArgv is a command that makes file's directory 0700 when it is
// missing, checks it as a deployed file's, and prints file's sha256sum
// line, or "-" when file is missing or one that may not be run; or it
// refuses (see ParseRefusal).
func GuardSumArgv(file string) []string {
	return []string{"/bin/sh", "-c", guardScript, guardName, "sum", file, ""}
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

// Deployed are the files a Host uploaded, by path, with their
// sha256. The zero value is ready to use.
type Deployed struct {
	mu sync.Mutex
	m  map[string]string
}

// Add records path's sha256 after an upload.
func (d *Deployed) Add(path, sum string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]string{}
	}
	d.m[path] = sum
}

// Guard is the package Guard with these files.
func (d *Deployed) Guard(argv []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Guard(d.m, argv)
}
