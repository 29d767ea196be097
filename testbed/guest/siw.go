package guest

// Debian's kernel packages build no siw (soft-iWARP) module, so the
// harness builds it out of tree from Debian's own linux-source and headers
// at the kernel's exact package version, and caches the .ko per kernel.
//
// A kernel from a newer suite than the host's (trixie-backports' 7.x on a
// bookworm host) needs two things the host lacks, and both are made here
// from that same linux-source rather than taken from another suite:
//   - its kbuild tools (fixdep, modpost, objtool) are linked against the
//     newer suite's glibc, so they are rebuilt with the host's compiler;
//   - its configured compiler (gcc-14) is not installed, so the host's
//     gcc compiles the module, and the config options that only describe
//     the compiler are made to describe the host's (what Kconfig would
//     have found). vermagic (release, SMP, preempt, mod_unload) names no
//     compiler and the kernel has no MODVERSIONS, so the module loads; the
//     guest tests then prove it works (siw0 carries rdma_cm traffic).

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// siwModule returns siw.ko for kernel release kver, building it out of
// tree from linux-source and the headers at the kernel's package version
// (about 150–180 MB to download, most of it the source, which is not kept)
// and caching it under CacheDir/siw.
func siwModule(ctx context.Context, a aptSource, kver string, kpkgs []string, log io.Writer) (string, error) {
	var version string
	for _, p := range kpkgs {
		if n, v, _ := strings.Cut(p, "="); n == "linux-image-"+kver {
			version = v
		}
	}
	if version == "" {
		return "", fmt.Errorf("no linux-image-%s among %v", kver, kpkgs)
	}
	cached := filepath.Join(CacheDir, "siw", kver+"_"+version, "siw.ko")
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	series := regexp.MustCompile(`^[0-9]+\.[0-9]+`).FindString(kver)
	pkgs, err := siwPackages(ctx, a, kver, series, version)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "vmtest-siw-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	start := time.Now()
	debs, err := download(ctx, a, filepath.Join(work, "debs"), pkgs, log)
	if err != nil {
		return "", err
	}
	x := filepath.Join(work, "x")
	for _, d := range debs {
		if _, err := run(ctx, "", "dpkg", "-x", d, x); err != nil {
			return "", err
		}
	}
	downloaded := time.Since(start)
	hdr := filepath.Join(x, "usr/src/linux-headers-"+kver)
	if err := relocateHeaders(hdr, x); err != nil {
		return "", err
	}
	newer, err := kbuildNeedsNewerLibc(hdr)
	if err != nil {
		return "", err
	}
	src := filepath.Join(work, "linux-source-"+series)
	members := []string{"drivers/infiniband/sw/siw"}
	if newer != "" {
		// What fixdep, modpost and objtool are built from.
		members = append(members, "scripts", "tools", "include")
	}
	args := []string{"-xJf", filepath.Join(x, "usr/src/linux-source-"+series+".tar.xz")}
	for _, m := range members {
		args = append(args, "linux-source-"+series+"/"+m)
	}
	if _, err := run(ctx, work, "tar", args...); err != nil {
		return "", err
	}
	makeArgs, err := hostCompiler(ctx, hdr, log)
	if err != nil {
		return "", err
	}
	if newer != "" {
		fmt.Fprintf(log, "vmtest: the kbuild tools of %s need %s; building them from linux-source-%s with the host's compiler\n", kver, newer, series)
		if err := buildKbuildTools(ctx, src, hdr, work, makeArgs); err != nil {
			return "", fmt.Errorf("build the kbuild tools: %w", err)
		}
	}
	fmt.Fprintf(log, "vmtest: building siw for %s\n", kver)
	mod := filepath.Join(src, "drivers/infiniband/sw/siw")
	if _, err := run(ctx, "", "make", append([]string{"-s", "-j2", "-C", hdr, "M=" + mod, "CONFIG_RDMA_SIW=m", "modules"}, makeArgs...)...); err != nil {
		return "", fmt.Errorf("%w (needs make, gcc, libelf1, and libelf-dev for a newer suite's kernel)", err)
	}
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		return "", err
	}
	if err := copyFile(filepath.Join(mod, "siw.ko"), cached+".tmp"); err != nil {
		return "", err
	}
	if err := os.Rename(cached+".tmp", cached); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "vmtest: siw for %s built in %s (%s of it downloading and unpacking)\n", kver,
		time.Since(start).Round(time.Second), downloaded.Round(time.Second))
	return cached, nil
}

// siwPackages are the packages siw is built from: the kernel's source and
// headers at the kernel's own version, and what the headers depend on.
func siwPackages(ctx context.Context, a aptSource, kver, series, version string) ([]string, error) {
	pkgs := []string{"linux-source-" + series + "=" + version, "linux-headers-" + kver + "=" + version}
	out, err := a.cache(ctx, "depends", "--no-recommends", "--no-suggests", "linux-headers-"+kver)
	if err != nil {
		return nil, err
	}
	for _, m := range regexp.MustCompile(`Depends: (linux-(?:headers|kbuild)-\S+)`).FindAllSubmatch(out, -1) {
		v, err := candidate(ctx, a, string(m[1]))
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, string(m[1])+"="+v)
	}
	if src, err := candidate(ctx, a, "linux-source-"+series); err != nil || src != version {
		return nil, fmt.Errorf("siw is built from linux-source-%s at the kernel's version %s, and apt offers %q (%v)", series, version, src, err)
	}
	return pkgs, nil
}

// relocateHeaders points the headers' Makefile, unpacked under x, at
// where they are: it names its output tree and the common headers by
// absolute path under /usr/src.
func relocateHeaders(hdr, x string) error {
	mk, err := os.ReadFile(filepath.Join(hdr, "Makefile"))
	if err != nil {
		return err
	}
	mk = bytes.ReplaceAll(mk, []byte("/usr/src/"), []byte(filepath.Join(x, "usr/src")+"/"))
	return os.WriteFile(filepath.Join(hdr, "Makefile"), mk, 0o644)
}

// kbuildTools are the headers' programs an out-of-tree module build runs
// (paths under the headers tree; Debian's modpost and objtool are wrappers
// around per-architecture *.real-* binaries).
var kbuildTools = []string{"scripts/basic/fixdep", "scripts/mod/modpost*", "tools/objtool/objtool*"}

// kbuildNeedsNewerLibc returns the glibc symbol version the headers'
// kbuild tools need beyond the host's ("GLIBC_2.38"), or "" if they run
// here.
func kbuildNeedsNewerLibc(hdr string) (string, error) {
	out, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	if err != nil {
		return "", fmt.Errorf("getconf GNU_LIBC_VERSION: %w", err)
	}
	host := strings.TrimPrefix(strings.TrimSpace(string(out)), "glibc ")
	newest := ""
	for _, pat := range kbuildTools {
		paths, _ := filepath.Glob(filepath.Join(hdr, pat))
		for _, p := range paths {
			f, err := elf.Open(p)
			if err != nil {
				continue // not an ELF program
			}
			syms, err := f.ImportedSymbols()
			f.Close()
			if err != nil {
				return "", fmt.Errorf("%s: %w", p, err)
			}
			for _, s := range syms {
				if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(host, v) && (newest == "" || versionLess(newest, v)) {
					newest = v
				}
			}
		}
	}
	if newest == "" {
		return "", nil
	}
	return "GLIBC_" + newest + " (the host has " + host + ")", nil
}

// versionLess compares dotted numeric versions: "2.36" < "2.38" < "2.100".
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// hostCompiler returns the make arguments that build with the kernel's
// configured compiler, or, when the host lacks it, with the host's gcc.
// In that case it rewrites the headers' generated config (auto.conf for
// make, autoconf.h for C) so that the options describing the compiler
// describe gcc as Kconfig would have found it:
//   - CONFIG_GCC_VERSION and CONFIG_CC_VERSION_TEXT, which select flags;
//   - CC_HAS_MIN_FUNCTION_ALIGNMENT (-fmin-function-alignment, gcc 14)
//     and CC_HAS_SANE_FUNCTION_ALIGNMENT, which follows it for gcc: without
//     them kbuild uses -falign-functions and the headers stop marking
//     functions __cold, which is what keeps an older gcc's functions
//     aligned;
//   - CC_HAS_ASSUME (the assume attribute, gcc 13.1).
//
// Every other compiler option in the config was checked against bookworm's
// gcc 12.2; a flag it lacks fails the build loudly rather than silently.
// Without pahole the module's BTF, which loading does not need, is left
// out.
func hostCompiler(ctx context.Context, hdr string, log io.Writer) ([]string, error) {
	autoconf := filepath.Join(hdr, "include/config/auto.conf")
	conf, err := os.ReadFile(autoconf)
	if err != nil {
		return nil, err
	}
	var args []string
	if _, err := exec.LookPath("pahole"); err != nil && bytes.Contains(conf, []byte("\nCONFIG_DEBUG_INFO_BTF_MODULES=y")) {
		args = append(args, "CONFIG_DEBUG_INFO_BTF_MODULES=")
	}
	m := regexp.MustCompile(`(?m)^CONFIG_CC_VERSION_TEXT="?([^ "\n]+)`).FindSubmatch(conf)
	if m == nil {
		return nil, fmt.Errorf("%s names no compiler (CONFIG_CC_VERSION_TEXT)", autoconf)
	}
	if _, err := exec.LookPath(string(m[1])); err == nil {
		return args, nil
	}
	cc := "gcc"
	full, err := run(ctx, "", cc, "-dumpfullversion")
	if err != nil {
		return nil, err
	}
	text, err := run(ctx, "", cc, "--version")
	if err != nil {
		return nil, err
	}
	var maj, min, patch int
	fmt.Sscanf(strings.TrimSpace(string(full)), "%d.%d.%d", &maj, &min, &patch)
	gccVersion := maj*10000 + min*100 + patch
	firstLine, _, _ := strings.Cut(string(text), "\n")
	minAlign := exec.CommandContext(ctx, cc, "-Werror", "-fmin-function-alignment=8", "-x", "c", "-S", "-o", os.DevNull, os.DevNull).Run() == nil
	fmt.Fprintf(log, "vmtest: %s is not installed; compiling the module with %s %s\n", m[1], cc, strings.TrimSpace(string(full)))
	set := map[string]string{ // option → value, "" for unset
		"GCC_VERSION":                    strconv.Itoa(gccVersion),
		"CC_VERSION_TEXT":                strconv.Quote(firstLine),
		"CC_HAS_MIN_FUNCTION_ALIGNMENT":  yn(minAlign),
		"CC_HAS_SANE_FUNCTION_ALIGNMENT": yn(minAlign),
		"CC_HAS_ASSUME":                  yn(gccVersion >= 130100),
	}
	if err := rewriteConfig(autoconf, set, false); err != nil {
		return nil, err
	}
	if err := rewriteConfig(filepath.Join(hdr, "include/generated/autoconf.h"), set, true); err != nil {
		return nil, err
	}
	return append(args, "CC="+cc, "HOSTCC="+cc), nil
}

func yn(b bool) string {
	if b {
		return "y"
	}
	return ""
}

// rewriteConfig sets options in auto.conf (CONFIG_X=v lines) or
// autoconf.h (#define CONFIG_X v lines): "y" is y (1 in C), "" removes the
// option, anything else is the value as written. Only options already in
// the file are rewritten or removed; a "y" option absent is added.
func rewriteConfig(path string, set map[string]string, header bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line := func(opt, v string) string {
		if header {
			if v == "y" {
				v = "1"
			}
			return "#define CONFIG_" + opt + " " + v
		}
		if opt == "CC_VERSION_TEXT" {
			v, _ = strconv.Unquote(v) // auto.conf writes this string bare
		}
		return "CONFIG_" + opt + "=" + v
	}
	var out []string
	done := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		opt := ""
		if header {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "#define" {
				opt = strings.TrimPrefix(f[1], "CONFIG_")
			}
		} else if k, _, ok := strings.Cut(l, "="); ok {
			opt = strings.TrimPrefix(k, "CONFIG_")
		}
		v, ok := set[opt]
		if !ok {
			out = append(out, l)
			continue
		}
		done[opt] = true
		if v != "" {
			out = append(out, line(opt, v))
		}
	}
	for opt, v := range set {
		if !done[opt] && v == "y" {
			out = append(out, line(opt, v))
		}
	}
	return os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644)
}

// buildKbuildTools builds fixdep, objtool and modpost from the kernel's
// source src with the host's compiler, and puts them where the headers'
// Makefiles run them (replacing Debian's binaries and wrappers). modpost's
// two generated headers are made as kbuild makes them: the device table
// offsets by compiling devicetable-offsets.c with the kernel's own flags
// (an out-of-tree single-target build in work/gen), the ELF class from an
// object compiled for the kernel.
func buildKbuildTools(ctx context.Context, src, hdr, work string, makeArgs []string) error {
	cc := "gcc"
	for _, a := range makeArgs {
		if v, ok := strings.CutPrefix(a, "HOSTCC="); ok {
			cc = v
		}
	}
	if _, err := os.Stat("/usr/include/gelf.h"); err != nil {
		return fmt.Errorf("objtool needs libelf's headers: apt-get install libelf-dev")
	}
	if _, err := run(ctx, "", cc, "-O2", "-I", filepath.Join(src, "scripts/include"), "-o", filepath.Join(hdr, "scripts/basic/fixdep"),
		filepath.Join(src, "scripts/basic/fixdep.c")); err != nil {
		return err
	}
	if _, err := run(ctx, "", "make", "-s", "-j2", "-C", filepath.Join(src, "tools/objtool"), "HOSTCC="+cc, "CC="+cc); err != nil {
		return err
	}
	if err := copyExec(filepath.Join(src, "tools/objtool/objtool"), filepath.Join(hdr, "tools/objtool/objtool")); err != nil {
		return err
	}
	gen := filepath.Join(work, "gen")
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"devicetable-offsets.c", "empty.c"} {
		if err := copyFile(filepath.Join(src, "scripts/mod", f), filepath.Join(gen, f)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(gen, "Kbuild"), []byte("# single targets only: modpost's generated headers\n"), 0o644); err != nil {
		return err
	}
	if _, err := run(ctx, "", "make", append([]string{"-s", "-C", hdr, "M=" + gen, "devicetable-offsets.s", "empty.o"}, makeArgs...)...); err != nil {
		return err
	}
	// kbuild's filechk_offsets: "->NAME $VALUE comment" strings to #defines.
	s, err := os.ReadFile(filepath.Join(gen, "devicetable-offsets.s"))
	if err != nil {
		return err
	}
	var h strings.Builder
	h.WriteString("#ifndef __DEVICETABLE_OFFSETS_H__\n#define __DEVICETABLE_OFFSETS_H__\n")
	for _, m := range regexp.MustCompile(`(?m)^\s*\.ascii\s*"->(\S+) [$#]*(\S+) (.*)"`).FindAllSubmatch(s, -1) {
		fmt.Fprintf(&h, "#define %s %s /* %s */\n", m[1], m[2], m[3])
	}
	h.WriteString("#endif\n")
	if err := os.WriteFile(filepath.Join(gen, "devicetable-offsets.h"), []byte(h.String()), 0o644); err != nil {
		return err
	}
	mkelf := filepath.Join(gen, "mk_elfconfig")
	if _, err := run(ctx, "", cc, "-O2", "-o", mkelf, filepath.Join(src, "scripts/mod/mk_elfconfig.c")); err != nil {
		return err
	}
	if _, err := run(ctx, gen, "sh", "-c", "./mk_elfconfig < empty.o > elfconfig.h"); err != nil {
		return err
	}
	srcs, _ := filepath.Glob(filepath.Join(src, "scripts/mod/*.c"))
	args := []string{"-O2", "-I", gen, "-I", filepath.Join(src, "scripts/include"), "-o", filepath.Join(gen, "modpost")}
	for _, f := range srcs {
		switch filepath.Base(f) {
		case "mk_elfconfig.c", "devicetable-offsets.c", "empty.c":
		default:
			args = append(args, f)
		}
	}
	if _, err := run(ctx, "", cc, args...); err != nil {
		return err
	}
	return copyExec(filepath.Join(gen, "modpost"), filepath.Join(hdr, "scripts/mod/modpost"))
}

// copyExec replaces to (through symlinks) with the program from.
func copyExec(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	os.Remove(to)
	return os.WriteFile(to, b, 0o755)
}
