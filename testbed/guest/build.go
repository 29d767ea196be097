package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ModuleRoot returns the directory of the module's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the rdmasweep module")
	}
	return filepath.Dir(mod), nil
}

// crossTriplets are the GNU triplets of the architectures whose static
// rdma node is cross-built, as make node-rdma-ARCH does: Debian's cross
// gcc, and the architecture's multiarch rdma-core and libnl.
var crossTriplets = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// staticEnv is the environment of a static rdma build for goarch ("" for
// this machine's): cgo on, and the static librdmacm and libibverbs with
// every provider (as make node-rdma links them).
func staticEnv(ctx context.Context, goarch string) ([]string, error) {
	env := os.Environ()
	pc := exec.CommandContext(ctx, "pkg-config", "--static", "--libs", "librdmacm", "libibverbs")
	install := "apt-get install libibverbs-dev librdmacm-dev pkg-config"
	if goarch != "" && goarch != runtime.GOARCH {
		triplet, ok := crossTriplets[goarch]
		if !ok {
			return nil, fmt.Errorf("no cross build of the rdma node for %s", goarch)
		}
		pc.Env = append(os.Environ(), "PKG_CONFIG_LIBDIR=/usr/lib/"+triplet+"/pkgconfig")
		env = append(env, "GOARCH="+goarch, "CC="+triplet+"-gcc")
		install = fmt.Sprintf("dpkg --add-architecture %s && apt-get update && apt-get install gcc-%s libibverbs-dev:%s librdmacm-dev:%s libnl-3-dev:%s libnl-route-3-dev:%s",
			goarch, strings.ReplaceAll(triplet, "_", "-"), goarch, goarch, goarch, goarch)
	}
	libs, err := pc.Output()
	if err != nil {
		return nil, fmt.Errorf("pkg-config --static --libs librdmacm libibverbs: %w (%s)", err, install)
	}
	return append(env, "CGO_ENABLED=1", "CGO_LDFLAGS="+strings.TrimSpace(string(libs))), nil
}

const staticLDFlags = `-linkmode external -extldflags "-static"`

func goBuild(ctx context.Context, goarch string, args ...string) error {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	return goBuildIn(ctx, root, goarch, args...)
}

// goBuildIn runs go with args in the module at root, statically for
// goarch.
func goBuildIn(ctx context.Context, root, goarch string, args ...string) error {
	env, err := staticEnv(ctx, goarch)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			// glibc's static-link warnings about NSS are expected.
			if !strings.Contains(l, "statically linked applications requires at runtime") && !strings.Contains(l, ": in function `") {
				keep = append(keep, l)
			}
		}
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.Join(keep, "\n"))
	}
	return nil
}

// BuildNode builds the static rdma node into out, as make node-rdma does.
func BuildNode(ctx context.Context, out string) error {
	return BuildNodeFor(ctx, out, "")
}

// BuildNodeFor builds the static rdma node for goarch ("" for this
// machine's) into out, as make node-rdma and make node-rdma-ARCH do.
func BuildNodeFor(ctx context.Context, out, goarch string) error {
	return goBuild(ctx, goarch, "build", "-tags", "rdma netgo osusergo", "-ldflags", "-X main.version=vmtest "+staticLDFlags, "-o", out, "./node")
}

// BuildNodeIn builds the static rdma node of the module at root (a
// scratch copy a test changed) into out, for this machine.
func BuildNodeIn(ctx context.Context, root, out string) error {
	return goBuildIn(ctx, root, "", "build", "-tags", "rdma netgo osusergo", "-ldflags", "-X main.version=scratch "+staticLDFlags, "-o", out, "./node")
}

// BuildGuestTests builds the static test binary of the guest tests (package
// ./node/transport/rdma/vmtest/guest) into out, with extra build tags
// (e.g. "bench").
func BuildGuestTests(ctx context.Context, out string, tags ...string) error {
	return BuildGuestTestsFor(ctx, out, "", tags...)
}

// BuildGuestTestsFor is BuildGuestTests for goarch ("" for this
// machine's).
func BuildGuestTestsFor(ctx context.Context, out, goarch string, tags ...string) error {
	tags = append([]string{"rdma", "rdmaguest", "netgo", "osusergo"}, tags...)
	return goBuild(ctx, goarch, "test", "-c", "-tags", strings.Join(tags, " "), "-ldflags", staticLDFlags, "-o", out, "./node/transport/rdma/vmtest/guest")
}
