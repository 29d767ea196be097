package guest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPruneKeepsOtherKernels: building one kernel's image removes that
// kernel's older images and images of the layout before kernels had
// names, keeps every other kernel's (the arm64 guest's too), and keeps
// only the downloaded packages some complete image was built from.
func TestPruneKeepsOtherKernels(t *testing.T) {
	dir := t.TempDir()
	old := CacheDir
	CacheDir = dir
	defer func() { CacheDir = old }()
	mk := func(name, complete string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		if complete != "" {
			os.WriteFile(filepath.Join(dir, name, "complete"), []byte(complete), 0o644)
		}
	}
	mk("bookworm-00000000000000aa", "linux-image-6.1.0-1-amd64=6.1.1-1\n")
	mk("bookworm-00000000000000bb", "linux-image-6.1.0-2-amd64=6.1.2-1\nbusybox=1:1.35.0-4\n")
	mk("trixie-backports-00000000000000cc", "linux-modules-7.3.4+deb13-amd64=7.3.4-1~bpo13+1\nbusybox=1:1.35.0-4\n")
	mk("bookworm-arm64-00000000000000ee", "linux-image-6.1.0-2-arm64=6.1.2-1\nbusybox=1:1.35.0-4\n")
	mk("00000000000000dd", "")
	mk("siw", "")
	os.MkdirAll(filepath.Join(dir, "debs"), 0o755)
	for _, d := range []string{"linux-image-6.1.0-1-amd64_6.1.1-1_amd64.deb", "linux-image-6.1.0-2-amd64_6.1.2-1_amd64.deb",
		"busybox_1%3a1.35.0-4_amd64.deb", "linux-modules-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb",
		"busybox_1%3a1.35.0-4_arm64.deb", "linux-image-6.1.0-2-arm64_6.1.2-1_arm64.deb"} {
		os.WriteFile(filepath.Join(dir, "debs", d), nil, 0o644)
	}
	prune(&Image{Kernel: Bookworm, Dir: filepath.Join(dir, "bookworm-00000000000000bb")})
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{"bookworm-00000000000000bb", "bookworm-arm64-00000000000000ee", "debs", "siw", "trixie-backports-00000000000000cc"}; !slices.Equal(left, want) {
		t.Errorf("cache after building bookworm's image: %v, want %v", left, want)
	}
	var debs []string
	ents, _ = os.ReadDir(filepath.Join(dir, "debs"))
	for _, e := range ents {
		debs = append(debs, e.Name())
	}
	if want := []string{"busybox_1%3a1.35.0-4_amd64.deb", "busybox_1%3a1.35.0-4_arm64.deb", "linux-image-6.1.0-2-amd64_6.1.2-1_amd64.deb",
		"linux-image-6.1.0-2-arm64_6.1.2-1_arm64.deb", "linux-modules-7.3.4+deb13-amd64_7.3.4-1~bpo13+1_amd64.deb"}; !slices.Equal(debs, want) {
		t.Errorf("packages kept: %v, want %v", debs, want)
	}
}
