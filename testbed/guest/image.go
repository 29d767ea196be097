// Package guest boots a Debian guest under qemu with soft-RoCE (rdma_rxe)
// and soft-iWARP (siw), so node's RDMA transport is tested on a real verbs
// stack on machines without RDMA hardware or KVM. The tests that boot it
// are node/transport/rdma/vmtest's; the tests that run inside it are
// node/transport/rdma/vmtest/guest, built by BuildGuestTests.
//
// The guest runs one of several kernels (Kernels: bookworm's 6.1 and the
// newest in trixie-backports) under the same bookworm user space, in an
// initramfs made from Debian packages (apt-get download + dpkg -x, no
// debootstrap, no maintainer scripts). BookwormArm64 is the same for arm64,
// kernel and user space, booted under qemu-system-aarch64. Both are cached under CacheDir,
// keyed by the exact package versions. Each boot prepends a small
// uncompressed cpio with the files of that run (binaries, a script, an
// authorized key), so the cached image is never rebuilt for new binaries.
//
// The guest has three NICs on user-mode networks of their own: eth0
// (GuestIP, sshd forwarded to the host) with rxe0, eth1 (GuestIP1) with
// rxe1, and eth2 (GuestIP2) with siw0 when the kernel has siw. /init loads
// the modules, adds the devices, starts sshd, prints "VMTEST KERNEL
// <release>" and "VMTEST READY", and runs /vmtest/run if the boot has one,
// ending with "VMTEST RESULT PASS" or "VMTEST RESULT FAIL": qemu itself
// exits 0 whatever happened inside.
package guest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/crypto/ssh"
)

// CacheDir holds the guest images, one directory per kernel and image key
// ("bookworm-0123456789abcdef"), the downloaded packages they were made
// from (debs/), the built siw modules (siw/) and the private apt state of
// extra suites (apt-<suite>/): $RDMASWEEP_VM_CACHE, or
// /var/cache/rdmasweep-vm. Building a kernel's image prunes that kernel's
// older images only, so every kernel keeps its own.
var CacheDir = cacheDir()

func cacheDir() string {
	if d := os.Getenv("RDMASWEEP_VM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/rdmasweep-vm"
}

// GuestIP is the guest's address on its first user-mode network (eth0,
// the one sshd is forwarded on), and the address rxe0's RoCE v2 GID maps.
const GuestIP = "10.0.2.15"

// The guest's other NICs, each on a user-mode network of its own: eth1
// carries rxe1, eth2 carries siw0 when the kernel has siw. siw needs a NIC
// of its own: where it shares one with rxe, rdma_cm resolves the address
// to the rxe device and a "siw" test silently runs on rxe.
const (
	GuestIP1 = "10.0.3.15"
	GuestIP2 = "10.0.4.15"
)

// A Kernel is a guest kernel the suite boots. Every kernel boots the same
// bookworm user space; only the kernel packages differ.
type Kernel struct {
	// Name keys the kernel's images in CacheDir and names its tests.
	Name string
	// Suite is a Debian suite added as an extra apt source for the
	// kernel's packages alone; "" takes them from the host's own sources.
	Suite string
	// Siw builds the siw (soft-iWARP) module out of tree from Debian's
	// linux-source and headers at the kernel's version (siw.go): Debian's
	// kernel packages ship none.
	Siw bool
	// Arch is the guest's Debian architecture, of its kernel and its user
	// space alike: "" for amd64, or "arm64", whose packages come from the
	// host's arm64 lists (dpkg --add-architecture arm64; apt-get update).
	Arch string
}

// arch is k's Debian architecture.
func (k Kernel) arch() string {
	if k.Arch == "" {
		return "amd64"
	}
	return k.Arch
}

var (
	// Bookworm is Debian 12's kernel (6.1), from the host's sources.
	Bookworm = Kernel{Name: "bookworm", Siw: true}
	// TrixieBackports is the newest kernel Debian backports to 13 (7.x):
	// crc32 built in, modules in .ko.xz, and an rxe that advertises ODP.
	TrixieBackports = Kernel{Name: "trixie-backports", Suite: "trixie-backports", Siw: true}
	// Kernels are the kernels the guest suite runs on.
	Kernels = []Kernel{Bookworm, TrixieBackports}
	// BookwormArm64 is Debian 12's arm64 kernel and user space, booted
	// under qemu-system-aarch64 (TCG) as Grace, BlueField and Ampere
	// hosts run them; one NIC, no siw.
	BookwormArm64 = Kernel{Name: "bookworm-arm64", Arch: "arm64"}
)

// Packages are installed into the guest root, with their dependencies.
// perftest (ib_read_bw) and fio are the peer workloads run in the guest;
// iperf3 measures a wire whose NIC reports no speed;
// tcpdump reads the RoCE packets' ToS off a wire, ethtool sets a wire
// NIC's speed, and capsh (libcap2-bin) starts an sshd without
// capabilities, as a container's would be.
var Packages = []string{
	"rdma-core", "ibverbs-providers", "ibverbs-utils", "perftest", "iproute2", "kmod",
	"openssh-server", "openssh-sftp-server", "busybox", "fio", "tcpdump", "libcap2-bin",
	"ethtool", "iperf3",
}

// modules are loaded in the guest (with their dependencies): every kernel
// must have them, as a module or built in. rdma_ucm is rdma_cm's device
// for user space.
var modules = []string{"virtio_pci", "virtio_net", "rdma_rxe", "rdma_ucm"}

// optionalModules are copied when the kernel has them as modules. 6.1's
// rxe needs the crc32 crypto algorithm without declaring it, and siw the
// crc32c one; newer kernels build crc32 in. /init loads what is there.
// sch_netem (loss on a wire), nvme and ext4 (a file on an NVMe drive), and
// NVMe over Fabrics' target (nvmet, over rdma and tcp) and initiator
// (nvme-rdma, nvme-tcp) are loaded by the tests that use them.
var optionalModules = []string{"crc32_generic", "crc32-pclmul", "crc32c_generic", "crc32c-intel", "siw", "sch_netem", "nvme", "ext4",
	"nvmet", "nvmet-rdma", "nvmet-tcp", "nvme-fabrics", "nvme-rdma", "nvme-tcp"}

//go:embed init.sh
var initScript []byte

// imageFormat changes whenever the image's layout or /init changes, so old
// cache entries are not reused.
const imageFormat = "7"

// Image is a cached kernel and base initramfs.
type Image struct {
	Kernel    Kernel
	Dir       string // CacheDir/<kernel name>-<key>
	Vmlinuz   string
	Initramfs string // base.cpio.zst
	// Release is the kernel's release (uname -r), e.g. "6.1.0-57-amd64".
	Release string
	// Siw reports the image holds a siw module.
	Siw     bool
	HostKey ssh.PublicKey
}

// EnsureImage returns the cached image of kernel k for the current package
// versions, building it first if needed. Progress goes to log.
func EnsureImage(ctx context.Context, k Kernel, log io.Writer) (*Image, error) {
	a, err := aptFor(ctx, k, log)
	if err != nil {
		return nil, fmt.Errorf("guest kernel %s: %w", k.Name, err)
	}
	kpkgs, err := resolveKernel(ctx, a, k.arch())
	if err != nil {
		return nil, fmt.Errorf("guest kernel %s: resolve the kernel packages: %w", k.Name, err)
	}
	u := userSpace(k)
	closure, err := resolve(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("resolve guest packages: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "format %s\nkernel %s %v\n", imageFormat, k.Name, k.Siw)
	if k.Arch != "" {
		fmt.Fprintf(h, "arch %s\n", k.Arch) // amd64's keys stay as they were
	}
	for _, p := range append(kpkgs, closure...) {
		fmt.Fprintln(h, p)
	}
	h.Write(initScript)
	fmt.Fprintf(h, "modules %v %v\n", modules, optionalModules) // a module added rebuilds
	key := hex.EncodeToString(h.Sum(nil))[:16]
	im := &Image{Kernel: k, Dir: filepath.Join(CacheDir, k.Name+"-"+key)}
	im.Vmlinuz = filepath.Join(im.Dir, "vmlinuz")
	im.Initramfs = filepath.Join(im.Dir, "base.cpio.zst")
	if _, err := os.Stat(filepath.Join(im.Dir, "complete")); err != nil {
		fmt.Fprintf(log, "vmtest: building guest image %s (kernel %s, %d packages)\n", im.Dir, strings.Join(kpkgs, " "), len(closure))
		if err := build(ctx, im, a, u, kpkgs, closure, log); err != nil {
			return nil, fmt.Errorf("build guest image for kernel %s: %w", k.Name, err)
		}
		prune(im)
	}
	b, err := os.ReadFile(filepath.Join(im.Dir, "release"))
	if err != nil {
		return nil, fmt.Errorf("guest image %s: %w", im.Dir, err)
	}
	rel := strings.Fields(string(b))
	if len(rel) == 0 {
		return nil, fmt.Errorf("guest image %s: empty release file", im.Dir)
	}
	im.Release, im.Siw = rel[0], len(rel) > 1 && rel[1] == "siw"
	pub, err := os.ReadFile(filepath.Join(im.Dir, "ssh_host_ed25519_key.pub"))
	if err != nil {
		return nil, fmt.Errorf("guest image %s: %w", im.Dir, err)
	}
	im.HostKey, _, _, _, err = ssh.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, fmt.Errorf("guest image %s: host key: %w", im.Dir, err)
	}
	return im, nil
}

var (
	imageDirRE = regexp.MustCompile(`^(?:(.+)-)?[0-9a-f]{16}$`)
	debNameRE  = regexp.MustCompile(`^([^_]+)_([^_]+)_[^_]+\.deb$`)
)

// prune removes im's kernel's other images (for package versions apt no
// longer offers, or an older layout), images of the layout before kernels
// had names, and downloaded packages no image was built from. Other
// kernels' images stay.
func prune(im *Image) {
	ents, _ := os.ReadDir(CacheDir)
	for _, e := range ents {
		p := filepath.Join(CacheDir, e.Name())
		m := imageDirRE.FindStringSubmatch(e.Name())
		if p == im.Dir || !e.IsDir() || m == nil || (m[1] != "" && m[1] != im.Kernel.Name) {
			continue
		}
		os.RemoveAll(p)
	}
	used := map[string]bool{}
	ents, _ = os.ReadDir(CacheDir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(CacheDir, e.Name(), "complete"))
		if err != nil {
			continue
		}
		for _, l := range strings.Fields(string(b)) {
			used[l] = true
		}
	}
	debs := filepath.Join(CacheDir, "debs")
	ents, _ = os.ReadDir(debs)
	for _, e := range ents {
		m := debNameRE.FindStringSubmatch(e.Name())
		if m == nil || !used[m[1]+"="+strings.ReplaceAll(m[2], "%3a", ":")] {
			os.Remove(filepath.Join(debs, e.Name()))
		}
	}
}

func run(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String()+string(out), 5)))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

var instRE = regexp.MustCompile(`(?m)^Inst (\S+) \((\S+) `)

// aptSource is how apt is asked about one kernel's packages: the host's
// configuration, or that plus options pointing at a private sources list
// and state for an extra suite, or making another architecture native.
type aptSource struct {
	opts []string
	arch string // the packages' Debian architecture: "amd64", "arm64"
}

// archOpts make arch apt's native and only architecture: package names
// without a suffix, and their dependencies, resolve to arch's packages.
// amd64 needs none, so the host's own configuration asks as it always has.
func archOpts(arch string) []string {
	if arch == "" || arch == "amd64" {
		return nil
	}
	return []string{"-o", "APT::Architecture=" + arch, "-o", "APT::Architectures::=" + arch}
}

// userSpace is how apt is asked about the guest's user space for k: the
// host's sources (bookworm), in k's architecture.
func userSpace(k Kernel) aptSource {
	return aptSource{opts: archOpts(k.arch()), arch: k.arch()}
}

func (a aptSource) cache(ctx context.Context, args ...string) ([]byte, error) {
	return run(ctx, "", "apt-cache", append(append([]string{}, a.opts...), args...)...)
}

// aptFor returns k's apt source. For an extra suite it keeps a sources
// list and package lists of its own under CacheDir, so the host's apt
// configuration is never changed, and refreshes them; offline, lists from
// an earlier run are used.
func aptFor(ctx context.Context, k Kernel, log io.Writer) (aptSource, error) {
	if k.Suite == "" {
		return userSpace(k), nil
	}
	if k.arch() != "amd64" {
		return aptSource{}, fmt.Errorf("an extra suite (%s) is only for amd64 kernels", k.Suite)
	}
	dir := filepath.Join(CacheDir, "apt-"+k.Suite)
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return aptSource{}, err
		}
	}
	list := filepath.Join(dir, "sources.list")
	src := fmt.Sprintf("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian %s main\n", k.Suite)
	if err := os.WriteFile(list, []byte(src), 0o644); err != nil {
		return aptSource{}, err
	}
	a := aptSource{opts: []string{
		"-o", "Dir::Etc::SourceList=" + list,
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(dir, "sources.list.d"),
		"-o", "Dir::Etc::Preferences=" + filepath.Join(dir, "preferences"),
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(dir, "preferences.d"),
		"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "Dir::State::status=/dev/null",
	}, arch: "amd64"}
	if _, err := run(ctx, "", "apt-get", append(append([]string{}, a.opts...), "-o", "APT::Sandbox::User=root", "-q", "update")...); err != nil {
		if lists, _ := filepath.Glob(filepath.Join(dir, "lists", "*Packages*")); len(lists) == 0 {
			return aptSource{}, fmt.Errorf("apt-get update for %s: %w", k.Suite, err)
		}
		fmt.Fprintf(log, "vmtest: apt-get update for %s failed, using the lists of an earlier run: %v\n", k.Suite, err)
	}
	return a, nil
}

// kernelPkgRE matches the versioned packages a kernel is made of: in
// bookworm linux-image-6.1.0-N-amd64 alone, in trixie-backports its
// linux-binary, linux-modules and linux-base parts as well.
var kernelPkgRE = regexp.MustCompile(`^linux-(image|binary|modules|base)-[0-9]`)

// resolveKernel returns the packages (name=version, sorted) that make up
// the kernel linux-image-ARCH points at in a.
func resolveKernel(ctx context.Context, a aptSource, arch string) ([]string, error) {
	meta := "linux-image-" + arch
	out, err := a.cache(ctx, "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances", meta)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var pkgs []string
	for _, l := range strings.Split(string(out), "\n") {
		name := strings.TrimSpace(l)
		if i := strings.LastIndex(name, ": "); i >= 0 {
			name = strings.TrimSpace(name[i+2:])
		}
		name = strings.Trim(name, "<>")
		if !kernelPkgRE.MatchString(name) || strings.Contains(name, "-unsigned-") || seen[name] {
			continue
		}
		seen[name] = true
		v, err := candidate(ctx, a, name)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, name+"="+v)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%s depends on no kernel package: %q", meta, out)
	}
	sort.Strings(pkgs)
	return pkgs, nil
}

// candidate is the version apt would install of name.
func candidate(ctx context.Context, a aptSource, name string) (string, error) {
	out, err := a.cache(ctx, "show", "--no-all-versions", name)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^Version: (\S+)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("apt-cache show %s: no version", name)
	}
	return string(m[1]), nil
}

// resolve returns the guest packages' dependency closure (name=version,
// sorted), as apt would install them on an empty system from the host's
// sources, in u's architecture.
func resolve(ctx context.Context, u aptSource) ([]string, error) {
	dir, err := os.MkdirTemp("", "vmtest-apt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return nil, err
	}
	args := append(append(append([]string{}, u.opts...), "-s", "-o", "Dir::State::status="+status, "install", "--no-install-recommends"), Packages...)
	out, err := run(ctx, "", "apt-get", args...)
	if err != nil {
		if u.arch != "amd64" && strings.Contains(err.Error(), "Unable to locate package") {
			err = fmt.Errorf("%w (the host's apt has no %s lists: dpkg --add-architecture %s && apt-get update)", err, u.arch, u.arch)
		}
		return nil, err
	}
	var closure []string
	for _, m := range instRE.FindAllSubmatch(out, -1) {
		closure = append(closure, string(m[1])+"="+string(m[2]))
	}
	if len(closure) == 0 {
		return nil, fmt.Errorf("apt-get -s installs nothing for %v", Packages)
	}
	sort.Strings(closure)
	return closure, nil
}

// download fetches pkgs (name=version) into debs with apt-get download,
// skipping those already there, and returns their paths.
func download(ctx context.Context, a aptSource, debs string, pkgs []string, log io.Writer) ([]string, error) {
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	// Packages of every architecture share debs: a package is its own
	// architecture's file, or the one arch-independent file.
	arch := a.arch
	if arch == "" {
		arch = "amd64"
	}
	find := func(p string) string {
		name, ver, _ := strings.Cut(p, "=")
		base := filepath.Join(debs, name+"_"+strings.ReplaceAll(ver, ":", "%3a")+"_")
		for _, f := range []string{base + arch + ".deb", base + "all.deb"} {
			if _, err := os.Stat(f); err == nil {
				return f
			}
		}
		return ""
	}
	var missing []string
	for _, p := range pkgs {
		if find(p) == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "vmtest: apt-get download %d packages (%d cached)\n", len(missing), len(pkgs)-len(missing))
		args := append(append(append([]string{}, a.opts...), "-q", "-o", "APT::Sandbox::User=root", "download"), missing...)
		if _, err := run(ctx, debs, "apt-get", args...); err != nil {
			return nil, err
		}
	}
	var paths []string
	for _, p := range pkgs {
		f := find(p)
		if f == "" {
			return nil, fmt.Errorf("apt-get download left no .deb for %s in %s", p, debs)
		}
		paths = append(paths, f)
	}
	return paths, nil
}

// build downloads and unpacks the kernel and packages, writes the files no
// maintainer script wrote, and packs the initramfs. It writes im.Dir/complete
// last, so an interrupted build is redone.
func build(ctx context.Context, im *Image, a, u aptSource, kpkgs, closure []string, log io.Writer) error {
	work, err := os.MkdirTemp("", "vmtest-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	kdir := filepath.Join(work, "kernel")
	root := filepath.Join(work, "root")
	if err := unpack(ctx, a, u, kpkgs, closure, kdir, root, log); err != nil {
		return err
	}
	modDir, err := moduleTree(kdir, kpkgs)
	if err != nil {
		return err
	}
	kver := filepath.Base(modDir)
	release := kver
	if im.Kernel.Siw {
		if err := addSiw(ctx, a, modDir, kpkgs, log); err != nil {
			return err
		}
		release += " siw"
	}
	if _, err := run(ctx, "", "depmod", "-b", kdir, kver); err != nil {
		return err
	}
	fmt.Fprintf(log, "vmtest: kernel %s; copying modules %v and those of %v it has\n", kver, modules, optionalModules)
	if err := copyModules(ctx, kdir, root, kver); err != nil {
		return err
	}
	if err := writeRootFiles(root); err != nil {
		return err
	}
	pruneRoot(root)
	if err := pack(ctx, im, kdir, modDir, root, log); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(im.Dir, "release"), []byte(release+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(im.Dir, "complete"), []byte(strings.Join(append(kpkgs, closure...), "\n")+"\n"), 0o644)
}

// unpack downloads the kernel packages into kdir and the root's closure
// into root, each unpacked with dpkg -x.
func unpack(ctx context.Context, a, u aptSource, kpkgs, closure []string, kdir, root string, log io.Writer) error {
	for _, d := range []string{kdir, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	debs := filepath.Join(CacheDir, "debs")
	for _, set := range []struct {
		src  aptSource
		pkgs []string
		into string
	}{{a, kpkgs, kdir}, {u, closure, root}} {
		files, err := download(ctx, set.src, debs, set.pkgs, log)
		if err != nil {
			return err
		}
		for _, d := range files {
			if _, err := run(ctx, "", "dpkg", "-x", d, set.into); err != nil {
				return err
			}
		}
	}
	return nil
}

// moduleTree returns the kernel's one module tree under kdir/lib/modules.
// Trixie's packages are merged-/usr: their modules are moved from
// usr/lib/modules to where modprobe -d looks.
func moduleTree(kdir string, kpkgs []string) (string, error) {
	if _, err := os.Stat(filepath.Join(kdir, "lib/modules")); err != nil {
		if err := os.MkdirAll(filepath.Join(kdir, "lib"), 0o755); err != nil {
			return "", err
		}
		if err := os.Rename(filepath.Join(kdir, "usr/lib/modules"), filepath.Join(kdir, "lib/modules")); err != nil {
			return "", fmt.Errorf("kernel packages %v: %w", kpkgs, err)
		}
	}
	kvers, err := filepath.Glob(filepath.Join(kdir, "lib/modules/*"))
	if err != nil || len(kvers) != 1 {
		return "", fmt.Errorf("kernel packages %v hold %d module trees", kpkgs, len(kvers))
	}
	return kvers[0], nil
}

// addSiw builds siw for the kernel of modDir and puts it under updates/.
func addSiw(ctx context.Context, a aptSource, modDir string, kpkgs []string, log io.Writer) error {
	kver := filepath.Base(modDir)
	ko, err := siwModule(ctx, a, kver, kpkgs, log)
	if err != nil {
		return fmt.Errorf("build siw for %s: %w", kver, err)
	}
	dst := filepath.Join(modDir, "updates", "siw.ko")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return copyFile(ko, dst)
}

// pruneRoot removes what the guest never needs: documentation and
// translations, and the Python that fio's package pulls in for its helper
// scripts (the fio binary does not use it).
func pruneRoot(root string) {
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info", "usr/share/lintian"} {
		os.RemoveAll(filepath.Join(root, d))
	}
	for _, pat := range []string{"usr/lib/python3*", "usr/bin/python3*", "usr/share/python3*"} {
		matches, _ := filepath.Glob(filepath.Join(root, pat))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
}

// pack writes the image: the kernel, the host key the guest will show,
// and the root packed as a zstd cpio archive.
func pack(ctx context.Context, im *Image, kdir, modDir, root string, log io.Writer) error {
	if err := os.MkdirAll(im.Dir, 0o755); err != nil {
		return err
	}
	// bookworm ships /boot/vmlinuz-<release>, trixie the modules' vmlinuz.
	vmlinuz := filepath.Join(kdir, "boot", "vmlinuz-"+filepath.Base(modDir))
	if _, err := os.Stat(vmlinuz); err != nil {
		vmlinuz = filepath.Join(modDir, "vmlinuz")
	}
	if err := copyFile(vmlinuz, im.Vmlinuz); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key.pub.copy"), filepath.Join(im.Dir, "ssh_host_ed25519_key.pub")); err != nil {
		return err
	}
	fmt.Fprintf(log, "vmtest: packing %s\n", im.Initramfs)
	tmp := im.Initramfs + ".tmp"
	sh := fmt.Sprintf("find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 | zstd -q -T0 -6 > %s", shellQuote(tmp))
	if _, err := run(ctx, root, "sh", "-c", sh); err != nil {
		return err
	}
	return os.Rename(tmp, im.Initramfs)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// copyModules copies the .ko files the guest loads, with their
// dependencies, and indexes them for modprobe. A required module the
// kernel lacks is an error; a built-in one needs no file.
func copyModules(ctx context.Context, kdir, root, kver string) error {
	seen := map[string]bool{}
	all := append(append([]string{}, modules...), optionalModules...)
	for i, m := range all {
		out, err := run(ctx, "", "modprobe", "-d", kdir, "-S", kver, "--show-depends", m)
		if err != nil {
			if i >= len(modules) {
				continue // optional, and not in this kernel
			}
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || f[0] != "insmod" || seen[f[1]] {
				continue // builtin lines, or seen
			}
			seen[f[1]] = true
			rel, err := filepath.Rel(kdir, f[1])
			if err != nil {
				return err
			}
			dst := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			// Newer kernels ship .ko.xz. The guest's kmod would unpack
			// each at every boot under TCG (after the kernel refuses it:
			// "Invalid ELF header magic"), so unpack them once here.
			if strings.HasSuffix(dst, ".ko.xz") {
				dst = strings.TrimSuffix(dst, ".xz")
				if _, err := run(ctx, "", "sh", "-c", "xz -dc < "+shellQuote(f[1])+" > "+shellQuote(dst)); err != nil {
					return err
				}
				continue
			}
			if err := copyFile(f[1], dst); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{"modules.order", "modules.builtin", "modules.builtin.modinfo"} {
		src := filepath.Join(kdir, "lib/modules", kver, f)
		if _, err := os.Stat(src); err == nil {
			if err := copyFile(src, filepath.Join(root, "lib/modules", kver, f)); err != nil {
				return err
			}
		}
	}
	_, err := run(ctx, "", "depmod", "-b", root, kver)
	return err
}

// writeRootFiles writes what maintainer scripts would have: accounts, the
// sshd configuration and host key, and /init.
func writeRootFiles(root string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "rdmasweep vmtest guest")
	if err != nil {
		return err
	}
	spub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		mode os.FileMode
		data []byte
	}{
		// root:* allows key login with PAM off; "!" would lock the account.
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")},
		{"etc/shadow", 0o600, []byte("root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n")},
		{"etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files\n")},
		{"etc/hosts", 0o644, []byte("127.0.0.1 localhost\n" + GuestIP + " guest\n")},
		{"etc/hostname", 0o644, []byte("guest\n")},
		{"etc/ssh/sshd_config", 0o644, []byte(strings.Join([]string{
			"Port 22", "HostKey /etc/ssh/ssh_host_ed25519_key", "UsePAM no", "PermitRootLogin prohibit-password",
			"PasswordAuthentication no", "KbdInteractiveAuthentication no", "StrictModes no", "UseDNS no",
			"MaxSessions 32", "MaxStartups 32", "AcceptEnv LANG", "Subsystem sftp /usr/lib/openssh/sftp-server", "",
		}, "\n"))},
		{"etc/ssh/ssh_host_ed25519_key", 0o600, pem.EncodeToMemory(blk)},
		{"etc/ssh/ssh_host_ed25519_key.pub", 0o644, ssh.MarshalAuthorizedKey(spub)},
		{"etc/ssh/ssh_host_ed25519_key.pub.copy", 0o644, ssh.MarshalAuthorizedKey(spub)},
		{"init", 0o755, initScript},
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		os.Remove(p)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "var/empty", "vmtest"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bin/busybox")); err != nil {
		return errors.New("guest root has no /bin/busybox")
	}
	// root's login shell, and what sshd runs commands with; no package
	// here provides it without its maintainer script.
	if _, err := os.Lstat(filepath.Join(root, "bin/sh")); err != nil {
		if err := os.Symlink("busybox", filepath.Join(root, "bin/sh")); err != nil {
			return err
		}
	}
	return nil
}
