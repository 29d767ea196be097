// Package vmtest boots a Debian guest under qemu with soft-RoCE (rdma_rxe on
// its virtio NIC), so node's RDMA transport is tested on a real verbs stack
// on machines without RDMA hardware or KVM.
//
// The guest is Debian's 6.1 kernel and an initramfs made from Debian
// packages (apt-get download + dpkg -x, no debootstrap, no maintainer
// scripts). Both are cached under CacheDir, keyed by the exact package
// versions. Each boot prepends a small uncompressed cpio with the files of
// that run (binaries, a script, an authorized key), so the cached image is
// never rebuilt for new binaries.
//
// In the guest, /init brings up eth0 as 10.0.2.15/24 (qemu user
// networking), loads crc32 before rdma_rxe (rxe needs the crc32 crypto
// algorithm but does not declare it), adds rxe0, starts sshd, prints
// "VMTEST READY", and runs /vmtest/run if the boot has one, ending with
// "VMTEST RESULT PASS" or "VMTEST RESULT FAIL": qemu itself exits 0
// whatever happened inside.
package vmtest

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

// CacheDir holds one directory per image key: $RDMASWEEP_VM_CACHE, or
// /var/cache/rdmasweep-vm. Building an image prunes the other keys' images
// in it, so it should hold nothing else.
var CacheDir = cacheDir()

func cacheDir() string {
	if d := os.Getenv("RDMASWEEP_VM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/rdmasweep-vm"
}

// GuestIP is the guest's address on its user-mode network, and the address
// its RoCE v2 GID (index 1 on rxe0) maps.
const GuestIP = "10.0.2.15"

// Packages are installed into the guest root, with their dependencies.
// perftest (ib_read_bw) and fio are the peer workloads run in the guest.
var Packages = []string{
	"rdma-core", "ibverbs-providers", "ibverbs-utils", "perftest", "iproute2", "kmod",
	"openssh-server", "openssh-sftp-server", "busybox", "fio",
}

// modules are loaded in the guest (with their dependencies).
var modules = []string{"virtio_pci", "virtio_net", "crc32_generic", "crc32-pclmul", "rdma_rxe"}

//go:embed init.sh
var initScript []byte

// imageFormat changes whenever the image's layout or /init changes, so old
// cache entries are not reused.
const imageFormat = "5"

// Image is a cached kernel and base initramfs.
type Image struct {
	Dir       string // CacheDir/<key>
	Kernel    string // vmlinuz
	Initramfs string // base.cpio.zst
	HostKey   ssh.PublicKey
}

// EnsureImage returns the cached image for the current package versions,
// building it first if needed. Progress goes to log.
func EnsureImage(ctx context.Context, log io.Writer) (*Image, error) {
	kpkg, closure, err := resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve guest packages: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "format %s\n%s\n", imageFormat, kpkg)
	for _, p := range closure {
		fmt.Fprintln(h, p)
	}
	h.Write(initScript)
	key := hex.EncodeToString(h.Sum(nil))[:16]
	im := &Image{Dir: filepath.Join(CacheDir, key)}
	im.Kernel = filepath.Join(im.Dir, "vmlinuz")
	im.Initramfs = filepath.Join(im.Dir, "base.cpio.zst")
	if _, err := os.Stat(filepath.Join(im.Dir, "complete")); err != nil {
		fmt.Fprintf(log, "vmtest: building guest image %s (kernel %s, %d packages)\n", im.Dir, kpkg, len(closure))
		if err := build(ctx, im, kpkg, closure, log); err != nil {
			return nil, fmt.Errorf("build guest image: %w", err)
		}
		prune(im.Dir)
	}
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

// prune removes the cache's other images: they are for package versions
// apt no longer offers, or for an older layout.
func prune(keep string) {
	ents, _ := os.ReadDir(filepath.Dir(keep))
	for _, e := range ents {
		p := filepath.Join(filepath.Dir(keep), e.Name())
		if p != keep && e.IsDir() && regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(e.Name()) {
			os.RemoveAll(p)
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
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String(), 5)))
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

// resolve returns the kernel package (name=version) and the guest packages'
// dependency closure (name=version, sorted), as apt would install them
// on an empty system.
func resolve(ctx context.Context) (string, []string, error) {
	out, err := run(ctx, "", "apt-cache", "depends", "--no-recommends", "--no-suggests", "linux-image-amd64")
	if err != nil {
		return "", nil, err
	}
	m := regexp.MustCompile(`Depends: (linux-image-\S+-amd64)`).FindSubmatch(out)
	if m == nil {
		return "", nil, fmt.Errorf("linux-image-amd64 depends on no linux-image package: %q", out)
	}
	kname := string(m[1])
	out, err = run(ctx, "", "apt-cache", "show", "--no-all-versions", kname)
	if err != nil {
		return "", nil, err
	}
	kv := regexp.MustCompile(`(?m)^Version: (\S+)`).FindSubmatch(out)
	if kv == nil {
		return "", nil, fmt.Errorf("no version for %s", kname)
	}
	dir, err := os.MkdirTemp("", "vmtest-apt-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return "", nil, err
	}
	args := append([]string{"-s", "-o", "Dir::State::status=" + status, "install", "--no-install-recommends"}, Packages...)
	out, err = run(ctx, "", "apt-get", args...)
	if err != nil {
		return "", nil, err
	}
	var closure []string
	for _, m := range instRE.FindAllSubmatch(out, -1) {
		closure = append(closure, string(m[1])+"="+string(m[2]))
	}
	if len(closure) == 0 {
		return "", nil, fmt.Errorf("apt-get -s installs nothing for %v", Packages)
	}
	sort.Strings(closure)
	return kname + "=" + string(kv[1]), closure, nil
}

// build downloads and unpacks the kernel and packages, writes the files no
// maintainer script wrote, and packs the initramfs. It writes im.Dir/complete
// last, so an interrupted build is redone.
func build(ctx context.Context, im *Image, kpkg string, closure []string, log io.Writer) error {
	work, err := os.MkdirTemp("", "vmtest-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	debs := filepath.Join(work, "debs")
	kdir := filepath.Join(work, "kernel")
	root := filepath.Join(work, "root")
	for _, d := range []string{debs, kdir, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "vmtest: apt-get download %d packages\n", len(closure)+1)
	args := append([]string{"-o", "APT::Sandbox::User=root", "download", kpkg}, closure...)
	if _, err := run(ctx, debs, "apt-get", args...); err != nil {
		return err
	}
	ents, err := os.ReadDir(debs)
	if err != nil {
		return err
	}
	kname := strings.SplitN(kpkg, "=", 2)[0]
	for _, e := range ents {
		dest := root
		if strings.HasPrefix(e.Name(), kname+"_") {
			dest = kdir
		}
		if _, err := run(ctx, "", "dpkg", "-x", filepath.Join(debs, e.Name()), dest); err != nil {
			return err
		}
	}
	kvers, err := filepath.Glob(filepath.Join(kdir, "lib/modules/*"))
	if err != nil || len(kvers) != 1 {
		return fmt.Errorf("kernel package %s holds %d module trees", kpkg, len(kvers))
	}
	kver := filepath.Base(kvers[0])
	if _, err := run(ctx, "", "depmod", "-b", kdir, kver); err != nil {
		return err
	}
	fmt.Fprintf(log, "vmtest: kernel %s; copying modules %v\n", kver, modules)
	if err := copyModules(ctx, kdir, root, kver); err != nil {
		return err
	}
	if err := writeRootFiles(root); err != nil {
		return err
	}
	// What the guest never needs: documentation and translations, and
	// the Python that fio's package pulls in for its helper scripts (the
	// fio binary does not use it).
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info", "usr/share/lintian"} {
		os.RemoveAll(filepath.Join(root, d))
	}
	for _, pat := range []string{"usr/lib/python3*", "usr/bin/python3*", "usr/share/python3*"} {
		matches, _ := filepath.Glob(filepath.Join(root, pat))
		for _, m := range matches {
			os.RemoveAll(m)
		}
	}
	if err := os.MkdirAll(im.Dir, 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(kdir, "boot", "vmlinuz-"+kver), im.Kernel); err != nil {
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
	if err := os.Rename(tmp, im.Initramfs); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(im.Dir, "complete"), []byte(kpkg+"\n"+strings.Join(closure, "\n")+"\n"), 0o644)
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
// dependencies, and indexes them for modprobe.
func copyModules(ctx context.Context, kdir, root, kver string) error {
	seen := map[string]bool{}
	for _, m := range modules {
		out, err := run(ctx, "", "modprobe", "-d", kdir, "-S", kver, "--show-depends", m)
		if err != nil {
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
