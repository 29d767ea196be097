package nvmeof

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// TargetModules and HostModules are the kernel modules each side needs
// for transport ("rdma" or "tcp").
func TargetModules(transport string) []string { return []string{"nvmet", "nvmet-" + transport} }
func HostModules(transport string) []string   { return []string{"nvme-fabrics", "nvme-" + transport} }

// ErrModule is wrapped when a module is neither loaded nor loadable.
var ErrModule = errors.New("kernel module missing")

// Load makes sure each module is loaded (/sys/module/NAME), running
// modprobe for those that are not. It returns the ones it loaded, to be
// said, and names the first it could not load.
func (s Sys) Load(ctx context.Context, mods []string) (loaded []string, err error) {
	for _, m := range mods {
		if s.Loaded(m) {
			continue
		}
		out, err := exec.CommandContext(ctx, "modprobe", m).CombinedOutput()
		if err != nil || !s.Loaded(m) {
			return loaded, fmt.Errorf("%w: %s is not loaded, and modprobe %s: %v %s (install the kernel's modules package, or load %s as root)",
				ErrModule, m, m, err, strings.TrimSpace(string(out)), m)
		}
		loaded = append(loaded, m)
	}
	return loaded, nil
}

// Loaded reports whether module m is loaded or built in.
func (s Sys) Loaded(m string) bool {
	_, err := os.Stat(filepath.Join(s.Module, strings.ReplaceAll(m, "-", "_")))
	return err == nil
}

// MountConfigfs mounts configfs on s.Configfs unless it is mounted there
// (nvmet's directory appears in it once nvmet is loaded). It reports
// whether it mounted it.
func (s Sys) MountConfigfs() (bool, error) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == s.Configfs && f[2] == "configfs" {
			return false, nil
		}
	}
	if err := syscall.Mount("none", s.Configfs, "configfs", 0, ""); err != nil {
		return false, fmt.Errorf("mount configfs on %s: %w", s.Configfs, err)
	}
	return true, nil
}
