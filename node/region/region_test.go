package region

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/node/pattern"
	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

var ctx = context.Background()

func content(t *testing.T, path string, n int64) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func TestCreateReuseExtend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d")
	const size = 5<<20 + 123 // not a whole number of write chunks
	f, err := Open(ctx, path, Options{Size: size, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !f.Created || !f.Patterned {
		t.Fatalf("first open: created %v patterned %v", f.Created, f.Patterned)
	}
	if bad, ok := pattern.Check(content(t, path, size), 0, f.Seed); !ok {
		t.Fatalf("created file differs from the pattern at %d", bad)
	}
	g, err := Open(ctx, path, Options{Size: size - 1000, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if g.Created || g.Seed != f.Seed || !g.Patterned {
		t.Fatalf("smaller second open: created %v, seed changed %v", g.Created, g.Seed != f.Seed)
	}
	h, err := Open(ctx, path, Options{Size: 2 * size, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if !h.Created || h.Seed != f.Seed {
		t.Fatalf("larger open: created %v, seed kept %v; want an extension with the same seed", h.Created, h.Seed == f.Seed)
	}
	if bad, ok := pattern.Check(content(t, path, 2*size), 0, f.Seed); !ok {
		t.Fatalf("extended file differs from the pattern at %d", bad)
	}
	// The sidecar is replaced whole each time: it vouches for the new
	// size, and no temporary file is left beside it.
	if sc, err := ReadSidecar(path); err != nil || sc.Size != 2*size || sc.Seed != f.Seed {
		t.Fatalf("sidecar after the extension: %+v, %v", sc, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 2 {
		t.Fatalf("beside the file: %v, want only it and its sidecar", ents)
	}
	// Without --create the same file is served, patterned, when big enough.
	r, err := Open(ctx, path, Options{Size: size})
	if err != nil || !r.Patterned || r.Created {
		t.Fatalf("plain open: %+v, %v", r, err)
	}
	r.Close()
	if _, err := Open(ctx, path, Options{Size: 3 * size}); err == nil || !strings.Contains(err.Error(), "fewer than") {
		t.Fatalf("plain open of a too-short file: %v", err)
	}
}

func TestCreateRefusesUserFileAndRedoesInterruptedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d")
	os.WriteFile(path, []byte("mine"), 0o644)
	if _, err := Open(ctx, path, Options{Size: 4096, Create: true}); !errors.Is(err, ErrUserFile) {
		t.Fatalf("create over a user's file: %v, want ErrUserFile", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "mine" {
		t.Fatal("user's file changed")
	}
	// A sidecar of size 0 is what an interrupted create leaves behind.
	os.WriteFile(path+results.SidecarSuffix, []byte(`{"seed":1,"size":0}`), 0o644)
	f, err := Open(ctx, path, Options{Size: 4096, Create: true})
	if err != nil {
		t.Fatalf("create after an interrupted one: %v", err)
	}
	f.Close()
	if !f.Created || !f.Patterned {
		t.Fatal("interrupted create was not redone")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Open(cctx, filepath.Join(t.TempDir(), "e"), Options{Size: 4096, Create: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a cancelled context: %v", err)
	}
}

func TestWarmResidency(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d")
	f, err := Open(ctx, path, Options{Size: 8 << 20, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.DropCache(); err != nil {
		t.Fatal(err)
	}
	if err := f.Warm(); err != nil {
		t.Fatal(err)
	}
	if r, err := f.Residency(); err != nil || r < 0.99 {
		t.Fatalf("residency after warming: %v, %v; want ~1", r, err)
	}
	m, err := f.Map()
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(m)
	if bad, ok := pattern.Check(m, 0, f.Seed); !ok || int64(len(m)) != f.Size {
		t.Fatalf("mapping of %d bytes differs at %d", len(m), bad)
	}
}

// A link planted at the data file's path, or at its sidecar's, in a
// directory another user can write, must not make node write pattern
// bytes into the link's target.
func TestCreateFollowsNoSymlink(t *testing.T) {
	precious := filepath.Join(t.TempDir(), "precious")
	const keep = "must survive"
	for _, tc := range []struct {
		name string
		link func(path string) string // plants the link, returns its path
	}{
		{"at the data file", func(path string) string { return path }},
		{"at the sidecar", func(path string) string { return path + results.SidecarSuffix }},
		{"at the data file, beside a sidecar that says an earlier create was cut short", func(path string) string {
			os.WriteFile(path+results.SidecarSuffix, []byte(`{"seed":1,"size":0}`), 0o644)
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(precious, []byte(keep), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "d")
			if err := os.Symlink(precious, tc.link(path)); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ctx, path, Options{Size: 4096, Create: true, Writable: true})
			if !errors.Is(err, ErrSymlink) {
				t.Fatalf("create through a link: %v, want ErrSymlink", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error does not name %s: %v", path, err)
			}
			if b, _ := os.ReadFile(precious); string(b) != keep {
				t.Fatalf("the link's target was written: %q", b)
			}
		})
	}
	// Serving (no create) does not follow a link at the path either.
	path := filepath.Join(t.TempDir(), "d")
	os.Symlink(precious, path)
	if _, err := Open(ctx, path, Options{Size: 4}); !errors.Is(err, ErrSymlink) {
		t.Fatalf("open through a link: %v, want ErrSymlink", err)
	}
}

// A patterned file and sidecar that another user owns (planted in a shared
// directory, or left by another user's run) are neither written nor
// believed.
func TestCreateRefusesAnotherUsersFile(t *testing.T) {
	testenv.NeedRoot(t) // to give the files away
	path := filepath.Join(t.TempDir(), "d")
	f, err := Open(ctx, path, Options{Size: 4096, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	const nobody = 65534
	for _, p := range []string{path, path + results.SidecarSuffix} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	before := content(t, path, 4096)
	if _, err := Open(ctx, path, Options{Size: 8192, Create: true}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("create over another user's file: %v, want ErrNotOwner", err)
	}
	if got := content(t, path, 4096); string(got) != string(before) {
		t.Fatal("another user's file was written")
	}
	// Only the data file theirs, the sidecar ours: still not written.
	os.Chown(path+results.SidecarSuffix, 0, 0)
	if _, err := Open(ctx, path, Options{Size: 4096, Create: true}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("create over another user's data file: %v, want ErrNotOwner", err)
	}
	// An extend (create growing the file, as a plan's larger file_size
	// does), the sidecar ours and vouching for 4096 bytes: the data file
	// is still theirs, and not a byte of it is written.
	if _, err := Open(ctx, path, Options{Size: 8192, Create: true}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("extend of another user's data file: %v, want ErrNotOwner", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 4096 {
		t.Fatalf("another user's data file after the extend: %v, %v bytes; want 4096 bytes as it was", err, st.Size())
	}
	if got := content(t, path, 4096); string(got) != string(before) {
		t.Fatal("another user's data file was written by the extend")
	}
}
