package outdir_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/hint"
)

// victim is a file of the runner's user outside the output directory,
// which a link planted in that directory points at.
func victim(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(p, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func unchanged(t *testing.T, p string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != "precious\n" {
		t.Fatalf("the link's target now holds %q (%v): the link was followed", b, err)
	}
}

// TestPlantedLinkNotFollowed: a link planted at the name of a file the
// runner writes in its output directory (the CSV, the series and counters
// it appends to, the manifest and record it replaces, a run's log
// directory) is refused or replaced, never written through.
func TestPlantedLinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	v := victim(t)
	plant := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(v, p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Opened in place (CSV, series, counters, logs): refused, saying so.
	csv := plant("x.csv")
	_, err := csvfile.Open(csv)
	if !errors.Is(err, outdir.ErrUnsafe) || !strings.Contains(err.Error(), "symbolic link") || hint.Of(err) == "" {
		t.Errorf("csvfile.Open of a planted link = %v (hint %q); want ErrUnsafe naming the link, with a hint", err, hint.Of(err))
	}
	for _, flag := range []int{os.O_WRONLY | os.O_CREATE | os.O_APPEND, os.O_WRONLY | os.O_CREATE | os.O_TRUNC} {
		if f, err := outdir.OpenFile(plant("log"), flag, outdir.Private); !errors.Is(err, outdir.ErrUnsafe) {
			f.Close()
			t.Errorf("OpenFile(%#x) of a planted link = %v, want ErrUnsafe", flag, err)
		}
		os.Remove(filepath.Join(dir, "log"))
	}
	unchanged(t, v)

	// Replaced whole (manifest, leftover record): the link itself is
	// replaced; its target is untouched.
	for _, write := range []func(string, os.FileMode, func(io.Writer) error) error{outdir.Write, outdir.Replace} {
		m := plant("run.json")
		if err := write(m, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err }); err != nil {
			t.Fatalf("write over a planted link: %v", err)
		}
		if st, err := os.Lstat(m); err != nil || !st.Mode().IsRegular() {
			t.Fatalf("after the write, %s is %v (%v), want a regular file", m, st.Mode(), err)
		}
		os.Remove(m)
	}
	unchanged(t, v)

	// A run's log directory planted as a link to another directory.
	other := t.TempDir()
	if err := os.Symlink(other, filepath.Join(dir, "RUN")); err != nil {
		t.Fatal(err)
	}
	d, err := outdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Mkdir("RUN", 0o700); !errors.Is(err, outdir.ErrUnsafe) {
		t.Errorf("Mkdir over a planted link = %v, want ErrUnsafe", err)
	}

	// A FIFO planted at a log's name is refused, not waited on.
	if err := unix.Mkfifo(filepath.Join(dir, "fifo.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenFile("fifo.log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, outdir.Private); !errors.Is(err, outdir.ErrUnsafe) {
		t.Errorf("OpenFile of a FIFO = %v, want ErrUnsafe", err)
	}
}

// TestRefusedDirectories: a directory someone else could plant a link in
// is refused before anything is written there, with what to do: another
// user's, or one its group or others may write, sticky or not (/tmp).
func TestRefusedDirectories(t *testing.T) {
	for _, c := range []struct {
		name string
		mode os.FileMode
		want string
	}{
		{"group-writable", 0o775, "writable by its group or others (mode 0775)"},
		{"other-writable", 0o757, "writable by its group or others (mode 0757)"},
		{"sticky, like /tmp", os.ModeSticky | 0o777, "writable by its group or others (mode 1777)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, c.mode); err != nil {
				t.Fatal(err)
			}
			refused(t, dir, c.want)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := csvfile.Open(filepath.Join(dir, "x.csv"))
			if err != nil {
				t.Fatalf("the same directory at 0755: %v", err)
			}
			f.Close()
		})
	}
	t.Run("another user's", func(t *testing.T) {
		dir := "/" // root's: another user's unless the test runs as root
		if os.Geteuid() == 0 {
			dir = filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		refused(t, dir, "belongs to uid ")
	})
}

// refused checks that every way of writing into dir is refused, saying
// want, and leaves nothing there.
func refused(t *testing.T, dir, want string) {
	t.Helper()
	before, _ := os.ReadDir(dir)
	_, err := csvfile.Open(filepath.Join(dir, "x.csv"))
	if !errors.Is(err, outdir.ErrUnsafe) || !strings.Contains(err.Error(), want) || hint.Of(err) == "" {
		t.Errorf("csvfile.Open in %s = %v (hint %q); want ErrUnsafe saying %q, with a hint", dir, err, hint.Of(err), want)
	}
	if _, err := outdir.OpenFile(filepath.Join(dir, "x.log"), os.O_WRONLY|os.O_CREATE, outdir.Private); !errors.Is(err, outdir.ErrUnsafe) {
		t.Errorf("OpenFile in %s = %v, want ErrUnsafe", dir, err)
	}
	if err := outdir.Write(filepath.Join(dir, "x.json"), 0o644, func(io.Writer) error { return nil }); !errors.Is(err, outdir.ErrUnsafe) {
		t.Errorf("Write in %s = %v, want ErrUnsafe", dir, err)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("%s went from %d entries to %d", dir, len(before), len(after))
	}
}

// TestLogsArePrivate: a file opened Private is its user's alone, whatever
// the umask: logs hold command lines.
func TestLogsArePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	old := unix.Umask(0)
	defer unix.Umask(old)
	f, err := outdir.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, outdir.Private)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("log mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}
