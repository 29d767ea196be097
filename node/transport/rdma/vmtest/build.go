package vmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
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

// staticEnv is the environment of a static rdma build: cgo on, and the
// static librdmacm and libibverbs with every provider (as make node-rdma
// links them).
func staticEnv(ctx context.Context) ([]string, error) {
	libs, err := exec.CommandContext(ctx, "pkg-config", "--static", "--libs", "librdmacm", "libibverbs").Output()
	if err != nil {
		return nil, fmt.Errorf("pkg-config --static --libs librdmacm libibverbs: %w (apt-get install libibverbs-dev librdmacm-dev pkg-config)", err)
	}
	return append(os.Environ(), "CGO_ENABLED=1", "CGO_LDFLAGS="+strings.TrimSpace(string(libs))), nil
}

const staticLDFlags = `-linkmode external -extldflags "-static"`

func goBuild(ctx context.Context, args ...string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	env, err := staticEnv(ctx)
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
	return goBuild(ctx, "build", "-tags", "rdma netgo osusergo", "-ldflags", "-X main.version=vmtest "+staticLDFlags, "-o", out, "./node")
}

// BuildGuestTests builds the static test binary of the guest tests (package
// ./node/transport/rdma/vmtest/guest) into out, with extra build tags
// (e.g. "bench").
func BuildGuestTests(ctx context.Context, out string, tags ...string) error {
	tags = append([]string{"rdma", "rdmaguest", "netgo", "osusergo"}, tags...)
	return goBuild(ctx, "test", "-c", "-tags", strings.Join(tags, " "), "-ldflags", staticLDFlags, "-o", out, "./node/transport/rdma/vmtest/guest")
}
