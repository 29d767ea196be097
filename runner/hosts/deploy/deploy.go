// Package deploy puts the node binary on a host: it refuses a binary built
// for another architecture than the host's, then uploads it atomically,
// skipping the upload when the host already has the same file.
package deploy

import (
	"context"
	"debug/elf"
	"fmt"
	"strings"

	"rdmasweep/runner/hosts/remote"
)

// Deploy checks that localBinary (an ELF executable) runs on h, by its ELF
// machine against hostArch, h's `uname -m` (runner/hosts/hostfacts collects it),
// then uploads it to remotePath (absolute) with h.Upload: mode 0755,
// atomic, "up to date" when the sha256 matches. Deploys of one process to
// one path on one machine take turns (see samefile.go), so two roles there
// as two users get one upload. Errors do not name the host: the caller
// does, once, at its per-host boundary.
func Deploy(ctx context.Context, h remote.Host, localBinary, remotePath, hostArch string) (remote.UploadResult, error) {
	want, err := binaryArch(localBinary)
	if err != nil {
		return remote.UploadResult{}, err
	}
	got := strings.TrimSpace(hostArch)
	if got == "" {
		return remote.UploadResult{}, fmt.Errorf("the host did not say its architecture (uname -m printed nothing)")
	}
	if !want.runsOn(got) {
		return remote.UploadResult{}, fmt.Errorf("node binary %s is built for %s, but the host is %s (uname -m): build it with GOARCH=%s",
			localBinary, want.name, got, goarch(got))
	}
	release, err := awaitTurn(ctx, fileKey(h, remotePath))
	if err != nil {
		return remote.UploadResult{}, err
	}
	defer release()
	res, err := h.Upload(ctx, localBinary, remotePath)
	if err != nil {
		return res, fmt.Errorf("upload %s: %w", localBinary, err)
	}
	return res, nil
}

// arch is an ELF binary's architecture and the `uname -m` values of
// machines that run it.
type arch struct {
	name   string
	unames []string
}

func (a arch) runsOn(uname string) bool {
	for _, u := range a.unames {
		if u == uname {
			return true
		}
	}
	return false
}

func binaryArch(path string) (arch, error) {
	f, err := elf.Open(path)
	if err != nil {
		return arch{}, fmt.Errorf("read node binary %s: %w (it must be a Linux ELF executable: build node with GOOS=linux)", path, err)
	}
	defer f.Close()
	le := f.ByteOrder.String() == "LittleEndian"
	switch {
	case f.Machine == elf.EM_X86_64:
		return arch{"x86_64", []string{"x86_64"}}, nil
	case f.Machine == elf.EM_AARCH64:
		return arch{"aarch64", []string{"aarch64", "arm64"}}, nil
	case f.Machine == elf.EM_386:
		return arch{"i386", []string{"i386", "i486", "i586", "i686", "x86_64"}}, nil
	case f.Machine == elf.EM_ARM:
		return arch{"arm", []string{"armv6l", "armv7l", "armv8l", "aarch64"}}, nil
	case f.Machine == elf.EM_PPC64 && le:
		return arch{"ppc64le", []string{"ppc64le"}}, nil
	case f.Machine == elf.EM_PPC64:
		return arch{"ppc64", []string{"ppc64"}}, nil
	case f.Machine == elf.EM_RISCV && f.Class == elf.ELFCLASS64:
		return arch{"riscv64", []string{"riscv64"}}, nil
	case f.Machine == elf.EM_S390:
		return arch{"s390x", []string{"s390x"}}, nil
	case f.Machine == elf.EM_LOONGARCH:
		return arch{"loongarch64", []string{"loongarch64"}}, nil
	}
	return arch{}, fmt.Errorf("node binary %s: unsupported ELF machine %v", path, f.Machine)
}

// goarch is the GOARCH that builds for a `uname -m`, for the error's hint.
func goarch(uname string) string {
	switch uname {
	case "x86_64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i486", "i586", "i686":
		return "386"
	case "armv6l", "armv7l", "armv8l":
		return "arm"
	case "loongarch64":
		return "loong64"
	}
	return uname
}
