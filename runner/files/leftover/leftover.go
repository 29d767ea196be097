// Package leftover keeps the record of the nodes an exec has started and
// not yet seen exit, and stops the ones an earlier exec left behind.
package leftover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// Record is the small file beside the CSV (CSV.state) that lists every
// node the runner started and has not yet seen exit. A runner killed with SIGKILL
// cannot stop its nodes; the next exec reads this file and kills the ones
// still alive. Pids are reused, so an entry is acted on only when the
// host's boot_id, the process's start time and its executable all match.
type Record struct {
	path    string
	mu      sync.Mutex
	entries []Entry
	gen     uint64                 // changes made to entries
	hosts   map[string]remote.Host // by Host.Name()
	bootIDs map[string]string

	// The file is written by one caller at a time, for every change made
	// before its write began (commit).
	wmu     sync.Mutex
	wdone   *sync.Cond // on wmu: a write ended
	writing bool
	written uint64         // the gen the file holds
	onDisk  map[Entry]bool // the entries it holds
}

// Entry is one started node.
type Entry struct {
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	PGID      int    `json:"pgid"`
	StartTime string `json:"start_time"` // /proc/PID/stat field 22, clock ticks since boot
	BootID    string `json:"boot_id"`
	Exe       string `json:"exe"`
}

// Open reads path, kills the leftovers it records on the given targets'
// hosts, and returns the record for this exec. Entries for hosts
// this exec does not reach are kept for a later one. report receives one
// message per leftover killed.
func Open(ctx context.Context, path string, targets []role.Target, report func(string)) (*Record, error) {
	s := &Record{path: path, hosts: map[string]remote.Host{}, bootIDs: map[string]string{}}
	s.wdone = sync.NewCond(&s.wmu)
	for _, t := range targets {
		s.hosts[t.Host.Name()] = t.Host
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read state: %w", err)
	}
	if len(data) > 0 {
		var old []Entry
		if err := json.Unmarshal(data, &old); err != nil {
			return nil, fmt.Errorf("read state %s: %w (remove it if no runner is running)", path, err)
		}
		for _, e := range old {
			h, ok := s.hosts[e.Host]
			if !ok {
				s.entries = append(s.entries, e) // another exec's host; keep
				continue
			}
			killed, warn, err := s.reap(ctx, h, e)
			if warn != "" {
				report(warn)
			}
			if err != nil {
				report(fmt.Sprintf("%s: could not check leftover node pid %d: %v", e.Host, e.PID, err))
				s.entries = append(s.entries, e)
			} else if killed {
				report(fmt.Sprintf("%s: killed leftover node pid %d from an earlier exec", e.Host, e.PID))
			}
		}
	}
	held, err := s.save()
	s.onDisk = held
	return s, err
}

// reap kills e's process group if e is still that very process, and that
// group is the process's own: the group is read from /proc/PID/stat and
// must be the recorded one and above 1. A forged state file, or a node
// reporting pgid 1, would otherwise have root run kill -KILL -- -1, which
// kills every process on the host. Where the group does not match, only
// the pid is killed, and warn says why.
func (s *Record) reap(ctx context.Context, h remote.Host, e Entry) (killed bool, warn string, err error) {
	id, err := s.identify(ctx, h, e.PID)
	if err != nil {
		return false, "", err
	}
	if id.start == "" || id.boot != e.BootID || id.start != e.StartTime || id.exe != e.Exe {
		return false, "", nil // gone, or the pid now belongs to someone else
	}
	// Group and pid in two commands: kill(1) given both exits 1 when the
	// group's SIGKILL let the parent reap the pid before its own turn.
	var groupErr error = errors.New("no process group recorded")
	if ownGroup(e, id.pgid) {
		_, groupErr = h.Run(ctx, []string{"kill", "-KILL", "--", "-" + strconv.Itoa(e.PGID)})
	} else {
		warn = fmt.Sprintf("%s: leftover node pid %d: its process group is %d, not the recorded %d (or not above 1): killing the pid alone", e.Host, e.PID, id.pgid, e.PGID)
	}
	if _, err := h.Run(ctx, []string{"kill", "-KILL", strconv.Itoa(e.PID)}); err != nil && groupErr != nil {
		return false, warn, fmt.Errorf("kill: %w", err)
	}
	return true, warn, nil
}

// ownGroup says whether e's recorded process group may be signalled: it
// is the group /proc/PID/stat gives the pid now, and above 1.
func ownGroup(e Entry, pgid int) bool {
	return e.PGID > 1 && pgid == e.PGID
}

// procID is what /proc says of a pid, to match against an Entry. A pid
// that does not exist has an empty start.
type procID struct {
	boot, start, exe string
	pgid             int
}

// identify reads the host's boot_id and pid's start time, process group
// and executable. A pid that does not exist gives an empty start time and
// no error.
func (s *Record) identify(ctx context.Context, h remote.Host, pid int) (procID, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p := strconv.Itoa(pid)
	// One command, so a remote host costs one round trip. Missing files
	// just leave their lines out.
	out, err := h.Run(ctx, []string{"sh", "-c", `cat /proc/sys/kernel/random/boot_id; cat /proc/$1/stat 2>/dev/null || echo; readlink /proc/$1/exe 2>/dev/null || echo`, "sh", p})
	if err != nil {
		return procID{}, err
	}
	lines := strings.Split(string(out), "\n")
	for len(lines) < 3 {
		lines = append(lines, "")
	}
	var id procID
	id.boot = strings.TrimSpace(lines[0])
	if stat := lines[1]; stat != "" {
		// Field 2 (comm) may hold spaces; fields after it follow ") ".
		if i := strings.LastIndex(stat, ") "); i >= 0 {
			f := strings.Fields(stat[i+2:])
			if len(f) > 19 {
				id.start = f[19]                // field 22 overall
				id.pgid, _ = strconv.Atoi(f[2]) // field 5
			}
		}
	}
	// A binary replaced by a newer deploy reads "PATH (deleted)"; the
	// process is still ours to reap.
	id.exe = strings.TrimSuffix(strings.TrimSpace(lines[2]), " (deleted)")
	return id, nil
}

// Add records a started node, and returns once the file holds it. It is
// the point Runner's Started hook. node reports its own start time and
// boot_id, so this costs no round trip. A node the file still holds (an
// agent of a pool sweep runs one command after another, each reporting
// the agent's own process) costs no write.
func (s *Record) Add(t role.Target, st *results.Started) {
	if st.StartTime == "" || st.BootID == "" {
		return // a node too old to say; it still exits on stdin EOF
	}
	e := Entry{Host: t.Host.Name(), PID: st.PID, PGID: st.PGID, StartTime: st.StartTime, BootID: st.BootID, Exe: t.NodePath}
	s.mu.Lock()
	s.entries = append(s.entries, e)
	s.gen++
	s.mu.Unlock()
	s.wmu.Lock()
	held := !s.writing && s.onDisk[e] // no write under way can drop it
	s.wmu.Unlock()
	if !held {
		s.commit()
	}
}

// Remove forgets a node once it is reaped. It is the point Runner's Exited
// hook. The file may list the node until its next write (the next new
// node's start, or Flush at the exec's end): an entry whose process has
// ended is never acted on, and a pool agent's entry stays on disk from
// one command to the next, where a rewrite at each command's end and
// start cost a pairwise round over 64 hosts two writes per host.
func (s *Record) Remove(t role.Target, st *results.Started) {
	s.mu.Lock()
	kept := s.entries[:0]
	for _, e := range s.entries {
		if !(e.Host == t.Host.Name() && e.PID == st.PID) {
			kept = append(kept, e)
		}
	}
	s.entries = kept
	s.gen++
	s.mu.Unlock()
}

// Flush returns once the file holds the record as it is (none when every
// node has ended): the exec's end.
func (s *Record) Flush() { s.commit() }

// commit returns once the file holds every change made before it was
// called. Callers that come while a write is under way wait for it and
// then share one more: a pairwise round over 64 hosts starts 64 nodes at
// once, and a write each, one after another, held each node's next event
// back for up to 64 writes.
func (s *Record) commit() {
	s.mu.Lock()
	want := s.gen
	s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for s.written < want {
		if s.writing {
			s.wdone.Wait()
			continue
		}
		s.writing = true
		s.wmu.Unlock()
		s.mu.Lock()
		gen := s.gen
		s.mu.Unlock()
		held, err := s.save()
		s.wmu.Lock()
		s.writing = false
		if err == nil {
			s.onDisk = held
		}
		s.written = max(s.written, gen)
		s.wdone.Broadcast()
	}
}

// save writes the record whole or not at all, and returns the entries
// the file then holds; an empty one removes the file. One save runs at a
// time (Open's, then commit's).
func (s *Record) save() (map[Entry]bool, error) {
	s.mu.Lock()
	entries := slices.Clone(s.entries)
	s.mu.Unlock()
	held := map[Entry]bool{}
	for _, e := range entries {
		held[e] = true
	}
	if len(entries) == 0 {
		err := os.Remove(s.path)
		if errors.Is(err, os.ErrNotExist) {
			return held, nil
		}
		return nil, err
	}
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return nil, err
	}
	// A full disk must not leave a partial file beside the CSV. No sync:
	// the entries name processes of this boot (boot_id), which a crash of
	// the machine ends, and a runner's crash leaves the page cache.
	err = outdir.Replace(s.path, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("write state: %w", err)
	}
	return held, nil
}
