package nvmeof

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rdmasweep/node/procstat"
	"rdmasweep/testbed/testenv"
)

// fakeSys is a Sys over a temporary directory with nvmet's three
// top-level directories, as configfs has them once nvmet is loaded.
func fakeSys(t *testing.T) Sys {
	d := t.TempDir()
	s := Sys{Configfs: filepath.Join(d, "config"), Records: filepath.Join(d, "records"), Class: filepath.Join(d, "class")}
	for _, sub := range []string{"hosts", "subsystems", "ports"} {
		if err := os.MkdirAll(filepath.Join(s.nvmet(), sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestSetupLeavesOthersAlone: a subsystem of the same NQN made by hand
// before the run makes Setup fail with ErrExists, and what Setup made
// before it (the host entry) is removed while the hand-made one and its
// contents stay; no record is left.
func TestSetupLeavesOthersAlone(t *testing.T) {
	s := fakeSys(t)
	tg := Target{NQN: "nqn.2014-08.org.example:hand", HostNQN: "nqn.2014-08.org.example:host", Transport: "tcp", Addr: "10.0.0.1", Path: "/f", Serial: "00"}
	hand := filepath.Join(s.nvmet(), "subsystems", tg.NQN)
	if err := os.MkdirAll(filepath.Join(hand, "namespaces"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := s.Setup(context.Background(), tg)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Setup over a hand-made subsystem: %v, want ErrExists", err)
	}
	if _, err := os.Stat(filepath.Join(hand, "namespaces")); err != nil {
		t.Errorf("the hand-made subsystem was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.nvmet(), "hosts", tg.HostNQN)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the host entry Setup made is still there (%v)", err)
	}
	if ents, _ := os.ReadDir(s.Records); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}
}

// TestCleanOnlyDeadMakers: Clean tears down a record whose maker is gone
// (its paths, then the record) and keeps one whose maker runs, and a path
// a record names outside nvmet's directory is never removed.
func TestCleanOnlyDeadMakers(t *testing.T) {
	if emu := os.Getenv("RDMASWEEP_NODE_EXEC"); emu != "" {
		// make test-arm64 leaves it out (-skip); make test runs it natively.
		testenv.Skip(t, "under "+emu+", whose made-up /proc/PID/stat gives the start time of the thread that reads it, so a live maker read from another Go thread looks gone")
	}
	s := fakeSys(t)
	os.MkdirAll(s.Records, 0o700)
	mk := func(name string, pid int, start string, paths ...string) {
		for _, p := range paths {
			os.MkdirAll(p, 0o755)
		}
		b, _ := json.Marshal(Made{Target: Target{NQN: name}, PortID: 7, Paths: paths, PID: pid, Start: start})
		os.WriteFile(filepath.Join(s.Records, "target-"+name+".json"), b, 0o600)
	}
	dead := filepath.Join(s.nvmet(), "subsystems", "dead")
	live := filepath.Join(s.nvmet(), "subsystems", "live")
	outside := filepath.Join(filepath.Dir(s.Configfs), "outside")
	mk("dead", 1<<22, "1", dead, outside) // no such pid
	mk("live", os.Getpid(), procstat.StartTime(os.Getpid()), live)
	done, err := s.Clean(context.Background(), "")
	if _, e := os.Stat(dead); !errors.Is(e, os.ErrNotExist) {
		t.Errorf("the dead maker's subsystem is still there (%v)", e)
	}
	if _, e := os.Stat(live); e != nil {
		t.Errorf("the running maker's subsystem was removed: %v", e)
	}
	if _, e := os.Stat(outside); e != nil || err == nil {
		t.Errorf("a recorded path outside nvmet: removed (%v), Clean's error %v; want kept and said", e, err)
	}
	t.Logf("cleaned %v; %v", done, err)
}

// TestTeardownLeavesSiblingsAlone: a recorded path in a sibling of
// nvmet's directory whose name only begins the same ("nvmet-x") is not
// nvmet's, and teardown leaves it, saying so.
func TestTeardownLeavesSiblingsAlone(t *testing.T) {
	s := fakeSys(t)
	sibling := filepath.Join(s.Configfs, "nvmet-x", "subsystems", "theirs")
	if err := os.MkdirAll(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	err := s.Teardown(&Made{Paths: []string{sibling}})
	if _, e := os.Stat(sibling); e != nil {
		t.Errorf("%s, beside nvmet's directory, was removed", sibling)
	}
	if err == nil || !strings.Contains(err.Error(), "left alone") {
		t.Errorf("teardown of a sibling's path: %v; want it refused, saying so", err)
	}
}

// TestSetupTarget: the port is bound to the data address given, never
// the wildcard (refused, with nothing made); the host entry is closed to
// other users (0700) before its key is set, since the kernel shows
// dhchap_key to all who reach it; a kernel without the attribute leaves
// the target without authentication, and says so (Auth); the key is in
// no record.
func TestSetupTarget(t *testing.T) {
	s := fakeSys(t)
	tg := Target{NQN: "nqn.2014-08.org.example:s", HostNQN: "nqn.2014-08.org.example:h", Transport: "tcp", Addr: "0.0.0.0",
		Path: "/proc/1/fd/3", Key: "DHHC-1:00:c2VjcmV0:", Serial: "00"}
	if _, err := s.Setup(context.Background(), tg); err == nil || !strings.Contains(err.Error(), "wildcard") {
		t.Errorf("Setup on 0.0.0.0: %v; want the wildcard refused", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.nvmet(), "hosts")); len(ents) != 0 {
		t.Errorf("Setup on 0.0.0.0 made %v", ents)
	}
	tg.Addr = "10.9.0.1"
	for _, auth := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "host")
		os.Mkdir(dir, 0o755)
		if auth { // as CONFIG_NVME_TARGET_AUTH's configfs has it
			os.WriteFile(filepath.Join(dir, "dhchap_key"), nil, 0o644)
		}
		m := &Made{Target: tg}
		if err := s.hostKey(m, dir); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(dir)
		key, _ := os.ReadFile(filepath.Join(dir, "dhchap_key"))
		if st.Mode().Perm() != 0o700 || m.Auth != auth || (auth && string(key) != tg.Key) {
			t.Errorf("kernel with dhchap_key %v: host entry mode %v, Auth %v, key %q; want 0700, %v, the key where there is the attribute",
				auth, st.Mode().Perm(), m.Auth, key, auth)
		}
		if b, _ := json.Marshal(m); strings.Contains(string(b), "DHHC") {
			t.Errorf("the record holds the key: %s", b)
		}
	}
}

// TestNamesAndKey: each point's secret gives its own NQNs and key; the
// key is in the DHHC-1 form the kernel parses: base64 of a 32-byte key
// and its CRC-32, little-endian.
func TestNamesAndKey(t *testing.T) {
	a, b := []byte("point a's secret"), []byte("point b's secret")
	na, ha := Names(a)
	nb, hb := Names(b)
	if na == nb || ha == hb || na == ha || Key(a) == Key(b) || HostID(a) == HostID(b) {
		t.Errorf("names %s %s / %s %s, keys %s / %s, host IDs %s / %s; want each its own", na, ha, nb, hb, Key(a), Key(b), HostID(a), HostID(b))
	}
	if id := HostID(a); !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Errorf("host ID %q: want a version 4 UUID", id)
	}
	k := Key(a)
	f := strings.Split(k, ":")
	if len(f) != 4 || f[0] != "DHHC-1" || f[1] != "00" || f[3] != "" {
		t.Fatalf("key %q: want DHHC-1:00:BASE64:", k)
	}
	raw, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(raw) != 36 {
		t.Fatalf("key %q: %d bytes (%v); want 32 and a CRC", k, len(raw), err)
	}
	if got, want := binary.LittleEndian.Uint32(raw[32:]), crc32.ChecksumIEEE(raw[:32]); got != want {
		t.Errorf("key's CRC %08x, want %08x", got, want)
	}
}

// TestDisconnectWhileTheKernelDeletes: a controller the kernel is
// already deleting (its delete_controller attribute gone, its directory
// not yet, as after ctrl_loss_tmo) counts as disconnected, and its record
// goes; one of another subsystem (the instance reused) is left alone, and
// the record goes too.
func TestDisconnectWhileTheKernelDeletes(t *testing.T) {
	s := fakeSys(t)
	for _, c := range []struct{ name, nqn string }{{"ours", "nqn.2014-08.org.example:ours"}, {"reused", "nqn.2014-08.org.example:another"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(s.Class, "nvme0")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "subsysnqn"), []byte(c.nqn+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			m := &Made{Target: Target{NQN: "nqn.2014-08.org.example:ours"}, Controller: "nvme0", PID: os.Getpid()}
			if err := s.record(m); err != nil {
				t.Fatal(err)
			}
			if err := s.Disconnect(m); err != nil {
				t.Errorf("Disconnect: %v; want nil", err)
			}
			if _, err := os.Stat(m.record); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the record is still there (%v)", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "delete_controller")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Disconnect made delete_controller (%v)", err)
			}
		})
	}
}
