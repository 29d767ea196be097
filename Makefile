# rdmasweep — see README.md.
#
#   make build      bin/runner, bin/node-linux-amd64 and bin/node-linux-arm64 (static,
#                   with rdma where rdma-core's static libraries are installed), and
#                   bin/node, this machine's own
#   make demo       run plans/loopback.yaml: both roles here, tcp
#   make readme-plot  redraw docs/loopback.png from a real loopback run
#   make test       every test (as root, for the namespace hosts and the soft-RoCE guest)
#   make bench      the side-by-side benchmarks, printed with their ratios
#   make fuzz       fuzz each target for FUZZTIME

GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 30s
X        := -X main.version=$(VERSION)
# The RDMA node links rdma-core's libibverbs and librdmacm statically, with
# libnl under them: these are their .a files, and what provides them.
RDMA_STATIC_LIBS := libibverbs.a librdmacm.a libnl-3.a libnl-route-3.a
RDMA_DEV_PKGS    := libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev pkg-config
RDMA_LIBDIR      := $(shell pkg-config --variable=libdir libibverbs 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
RDMA_MISSING     := $(strip $(foreach l,$(RDMA_STATIC_LIBS),$(if $(wildcard $(RDMA_LIBDIR)/$(l)),,$(l))))
HAVE_IBVERBS     := $(if $(RDMA_MISSING),,$(shell pkg-config --exists librdmacm libibverbs 2>/dev/null && echo yes))
RDMA_LDFLAGS      = $$(pkg-config --static --libs librdmacm libibverbs)

# The other architectures' nodes are cross-built: Debian's cross gcc, and
# that architecture's rdma-core and libnl static libraries from Debian's
# multiarch packages (dpkg --add-architecture), found with their own
# pkg-config data. Where those are missing the node is built tcp-only.
HOST_GOARCH     := $(shell $(GO) env GOARCH 2>/dev/null)
NODE_ARCHES     := amd64 arm64
CROSS_ARCHES    := $(filter-out $(HOST_GOARCH),$(NODE_ARCHES))
TRIPLET_amd64   := x86_64-linux-gnu
TRIPLET_arm64   := aarch64-linux-gnu
CROSS_GCC_amd64 := gcc-x86-64-linux-gnu libc6-dev-amd64-cross
CROSS_GCC_arm64 := gcc-aarch64-linux-gnu libc6-dev-arm64-cross
cross_missing    = $(strip $(if $(shell command -v $(TRIPLET_$(1))-gcc 2>/dev/null),,$(TRIPLET_$(1))-gcc) \
	$(foreach l,$(RDMA_STATIC_LIBS),$(if $(wildcard /usr/lib/$(TRIPLET_$(1))/$(l)),,$(1)/$(l))))
$(foreach a,$(CROSS_ARCHES),$(eval CROSS_MISSING_$(a) := $(call cross_missing,$(a))))

# node-linux-% and node-rdma-% are pattern rules, which make skips for
# .PHONY targets; no file has their names.
.PHONY: build runner node node-tcp node-rdma node-linux-$(HOST_GOARCH) \
	demo readme-plot test test-stub test-rdma-link test-arm64 bench fuzz clean

# build says which transports each node got, and why not rdma when it did
# not: a tcp-only node still runs every plan with transport: tcp. The
# runner gives each host the node for its architecture (bin/node for this
# machine's, bin/node-linux-ARCH for the others).
build: runner node $(addprefix node-linux-,$(NODE_ARCHES))
	@bin/node version
ifneq ($(HAVE_IBVERBS),yes)
	@echo "bin/node has no rdma transport: missing $(or $(RDMA_MISSING),pkg-config data for librdmacm/libibverbs); make node-rdma says what to install" >&2
endif

# This machine's own node under its other name, for copying bin/ to a
# host of this architecture.
node-linux-$(HOST_GOARCH): node
	cp -f bin/node bin/node-linux-$(HOST_GOARCH)

# Another architecture's node: static with rdma when the cross compiler
# and its static libraries are installed, else tcp-only, said but not
# failed.
node-linux-%:
	@if [ -n "$(CROSS_MISSING_$*)" ]; then \
		echo "bin/node-linux-$* has no rdma transport: missing $(CROSS_MISSING_$*); make node-rdma-$* says what to install" >&2; \
		echo "CGO_ENABLED=0 GOARCH=$* $(GO) build -tags netgo,osusergo -o bin/node-linux-$* ./node"; \
		CGO_ENABLED=0 GOARCH=$* $(GO) build -tags netgo,osusergo -ldflags '$(X)' -o bin/node-linux-$* ./node; \
	else \
		$(MAKE) --no-print-directory node-rdma-$*; \
	fi
	@echo "bin/node-linux-$*: $$(file -b bin/node-linux-$* | cut -d, -f1-2), transports: $(if $(CROSS_MISSING_$*),tcp,rdma tcp)"

# Another architecture's static rdma node, cross-built; it fails, saying
# what to install, where the cross compiler or libraries are missing.
node-rdma-%:
	@if [ -n "$(CROSS_MISSING_$*)" ]; then \
		echo "make node-rdma-$*: the static $* node needs $(TRIPLET_$*)-gcc and $*'s $(RDMA_STATIC_LIBS); missing: $(CROSS_MISSING_$*)" >&2; \
		echo "  Debian/Ubuntu: dpkg --add-architecture $* && apt-get update && apt-get install $(CROSS_GCC_$*) $(addsuffix :$*,$(filter-out pkg-config,$(RDMA_DEV_PKGS))) pkg-config" >&2; \
		exit 1; \
	fi
	CGO_ENABLED=1 GOARCH=$* CC=$(TRIPLET_$*)-gcc \
		CGO_LDFLAGS="$$(PKG_CONFIG_LIBDIR=/usr/lib/$(TRIPLET_$*)/pkgconfig pkg-config --static --libs librdmacm libibverbs)" \
		$(GO) build -tags 'rdma netgo osusergo' \
		-ldflags '$(X) -linkmode external -extldflags "-static"' -o bin/node-linux-$* ./node
	@file bin/node-linux-$* | grep -q 'statically linked' || { echo 'bin/node-linux-$* is not statically linked' >&2; exit 1; }

runner:
	CGO_ENABLED=0 $(GO) build -ldflags '$(X)' -o bin/runner ./runner

ifeq ($(HAVE_IBVERBS),yes)
node: node-rdma
else
node: node-tcp
endif

# A static node with the tcp transport only; runs anywhere.
node-tcp:
	CGO_ENABLED=0 $(GO) build -tags netgo,osusergo -ldflags '$(X)' -o bin/node ./node

# A static node with libibverbs, librdmacm and every rdma-core provider
# linked in, so it finds a device on hosts without rdma-core installed.
# What works, not only what is linked:
#   - InfiniBand and RoCE (mlx5, mlx4, bnxt_re, irdma in RoCE mode, …; rxe
#     in the test guest): RC RDMA READ with connect tcp or connect cm.
#   - iWARP (cxgb4, irdma in iWARP mode; siw in the test guest): connect cm
#     only; connect tcp is refused with a hint to use cm.
#   - EFA (SRD, no RC queue pairs) and usNIC: listed by node devices, and
#     refused with the reason.
# Only rxe and siw run here (the soft-RoCE/soft-iWARP guests of make test);
# the hardware providers are linked and reached through the same verbs,
# untested without their hardware.
node-rdma:
	@if [ -n "$(RDMA_MISSING)" ] || ! pkg-config --exists librdmacm libibverbs 2>/dev/null; then \
		echo "make node-rdma: the static node needs $(RDMA_STATIC_LIBS) and their pkg-config data; missing: $(or $(RDMA_MISSING),pkg-config data)" >&2; \
		echo "  Debian/Ubuntu: apt-get install $(RDMA_DEV_PKGS)" >&2; \
		echo "  RHEL, Rocky, Fedora: rdma-core-devel and libnl3-devel ship no .a files, so the node cannot be built static there;" >&2; \
		echo "  build it in a Debian container instead (the static binary runs on any x86-64 Linux):" >&2; \
		echo "    docker run --rm -v \"\$$PWD\":/src -w /src golang:bookworm sh -c 'apt-get update && apt-get install -y $(RDMA_DEV_PKGS) && make node-rdma'" >&2; \
		exit 1; \
	fi
	CGO_ENABLED=1 CGO_LDFLAGS="$(RDMA_LDFLAGS)" \
		$(GO) build -tags 'rdma netgo osusergo' \
		-ldflags '$(X) -linkmode external -extldflags "-static"' -o bin/node ./node
	@file bin/node | grep -q 'statically linked' || { echo 'bin/node is not statically linked' >&2; exit 1; }

demo: build
	bin/runner exec plans/loopback.yaml

# The README's chart, from a real loopback run, never drawn by hand: three
# repetitions of plans/loopback.yaml, plotted with ±1 sd error bars. Only
# docs/loopback.png changes; the CSV, manifest and logs go to a temp dir,
# and runner clean removes the data file afterwards.
readme-plot: build
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	bin/runner exec plans/loopback.yaml --set repeat=3 --set output.logs=$$tmp/logs --out $$tmp/loopback.csv && \
	mkdir -p docs && bin/runner plot $$tmp/loopback.csv -o docs/loopback.png && \
	bin/runner clean plans/loopback.yaml --out $$tmp/loopback.csv --yes

# The stub build (no cgo) is vetted and tested too, so it never rots. The
# guest tests are left to the main run: they build their own static node.
test-stub:
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 $$($(GO) list ./node/... | grep -v /vmtest)

# The C shim's mirrors of the Go pattern and latency buckets, checked
# against Go in a static rdma build (the only kind the providers link in).
# Without rdma-core's static libraries it says so on stderr, and under
# CI=true it fails.
ifeq ($(HAVE_IBVERBS),yes)
test-rdma-link:
	CGO_ENABLED=1 $(GO) vet -tags 'rdma rdmaguest bench' ./node/...
	CGO_ENABLED=1 CGO_LDFLAGS="$(RDMA_LDFLAGS)" \
		$(GO) test -count=1 -tags 'rdma netgo osusergo' \
		-ldflags '-linkmode external -extldflags "-static"' ./node/transport/rdma/
else
test-rdma-link:
	@echo "make test-rdma-link: skipped: missing $(or $(RDMA_MISSING),pkg-config data for librdmacm/libibverbs) (apt-get install $(RDMA_DEV_PKGS))" >&2
	@[ "$$CI" != true ] || { echo "make test-rdma-link: CI must run it" >&2; exit 1; }
endif

# The arm64 node under qemu-user, which needs no binfmt registration:
# node's package tests built for arm64 and run by qemu-aarch64-static (node
# itself through the same emulator), the C shim's in the static rdma
# build, and bin/node-linux-arm64 saying version --json. Soft-RoCE on
# arm64 is runner's TestArm64Guest, in qemu-system-aarch64.
# ARM64_SKIP are the node tests the emulator cannot hold, left out here
# and run natively by make test: attach --loop execs node's own arm64
# binary, which this kernel runs only through qemu; and the emulator's
# first pass through the stop path can outlast node's 1 s stop grace; and
# the emulator's made-up /proc/PID/stat gives the reading thread's start
# time, which differs between Go threads, so nvmeof's clean sees a live
# maker gone.
# Under the emulator each skips through testenv, which CI=true fails.
# Emulated, node's package took 414 s at load 19: past go test's 10 min
# default not far above that.
QEMU_ARM64 ?= qemu-aarch64-static
ARM64_SKIP := ^(TestAttachLoop|TestStopsOnStdinEOFAndDeadline|TestSIGINT|TestCleanOnlyDeadMakers)$$
ARM64_ENV   = GOARCH=arm64 CC=aarch64-linux-gnu-gcc \
	CGO_LDFLAGS="$$(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig pkg-config --static --libs librdmacm libibverbs)"
ifneq ($(shell command -v $(QEMU_ARM64) 2>/dev/null),)
test-arm64: node-linux-arm64
	@[ "$$CI" != true ] || [ -z "$(CROSS_MISSING_arm64)" ] || { echo "make test-arm64: CI builds the arm64 rdma node, and $(CROSS_MISSING_arm64) is missing" >&2; exit 1; }
	RDMASWEEP_NODE_EXEC=$(QEMU_ARM64) CGO_ENABLED=0 GOARCH=arm64 \
		$(GO) test -count=1 -timeout 30m -exec $(QEMU_ARM64) -skip '$(ARM64_SKIP)' $$($(GO) list ./node/... | grep -v /vmtest)
ifeq ($(CROSS_MISSING_arm64),)
	CGO_ENABLED=1 $(ARM64_ENV) $(GO) test -count=1 -exec $(QEMU_ARM64) -tags 'rdma netgo osusergo' \
		-ldflags '-linkmode external -extldflags "-static"' ./node/transport/rdma/
endif
	@v=$$($(QEMU_ARM64) bin/node-linux-arm64 version --json) && echo "$(QEMU_ARM64) bin/node-linux-arm64 version --json: $$v" && \
	echo "$$v" | grep -q '"arch":"arm64"' && { [ -n "$(CROSS_MISSING_arm64)" ] || echo "$$v" | grep -q '"transports":\["rdma","tcp"\]'; } || \
	{ echo "make test-arm64: want arch arm64$(if $(CROSS_MISSING_arm64),, and the rdma transport)" >&2; exit 1; }
else
test-arm64:
	@echo "make test-arm64: skipped: no $(QEMU_ARM64) (apt-get install qemu-user-static)" >&2
	@[ "$$CI" != true ] || { echo "make test-arm64: CI must run it" >&2; exit 1; }
endif

# The point runner's tests run its goroutines in process, so they run
# under the race detector (RACE_PKGS); everything else without it.
RACE_PKGS := ./runner/points/point

test: build test-stub test-rdma-link test-arm64
	$(GO) vet ./...
	$(GO) vet -tags bench ./...   # the benchmarks build, though make test does not run them
	$(GO) test -count=1 -race $(RACE_PKGS)
	$(GO) test -count=1 -timeout 80m $$($(GO) list ./... | grep -vxF $(foreach p,$(RACE_PKGS),-e $(patsubst ./%,rdmasweep/%,$(p))))

# The side-by-side benchmarks of docs/performance.md, with the load
# average before and after. The peers are plans run by the runner itself:
# bench-tcp here on loopback (node beside iperf3) and, in the runner's
# TestBenchTCPHosts, across two namespace hosts; bench-rdma (node beside
# ib_read_bw) and bench-ssd (fio beside node's pinned registration) in
# the soft-RoCE guest. Then the benchmarks that are not peers: the SFTP
# uploader beside OpenSSH's sftp and the runner's overhead per point,
# and the tight timings the ordinary tests hold only with margin (node's
# start at a go's named time). Last, each plan's summary with its ratios.
BENCH_OUT ?= out/bench
bench: build
	rm -rf $(BENCH_OUT) && mkdir -p $(BENCH_OUT)
	@echo "load average before: $$(cut -d' ' -f1-3 /proc/loadavg) ($$(nproc) CPUs)"
	bin/runner exec plans/bench-tcp.yaml --out $(BENCH_OUT)/bench-tcp.csv --set output.logs=$(BENCH_OUT)/logs
	RDMASWEEP_BENCH_OUT=$(abspath $(BENCH_OUT)) $(if $(filter yes,$(HAVE_IBVERBS)),RDMASWEEP_NODE=$(abspath bin/node)) \
		$(GO) test -count=1 -tags bench -run 'Bench' -v -timeout 40m ./node ./runner/... ./node/transport/rdma/vmtest/
	@echo "load average after: $$(cut -d' ' -f1-3 /proc/loadavg) ($$(nproc) CPUs)"
	@for p in bench-tcp:iperf3 bench-tcp-hosts:iperf3 bench-rdma:ib_read_bw bench-ssd:fio; do \
		csv=$(BENCH_OUT)/$${p%%:*}.csv; [ -f $$csv ] || continue; echo "== $${p%%:*}"; \
		bin/runner summary --baseline workload=$${p#*:} $$csv; done

# Fuzz one target at a time for FUZZTIME each; `make test` already runs
# every committed corpus as ordinary tests.
FUZZ_TARGETS := FuzzLoad:./plan/ FuzzDecode:./results/ FuzzServeRequests:./node/transport/tcp/ \
	FuzzDecodeEndpoint:./node/transport/rdma/ FuzzServerHandshake:./node/transport/rdma/ \
	FuzzParseIBReadBW:./runner/points/peer/ FuzzParseIperf3:./runner/points/peer/ FuzzParseFio:./runner/points/peer/ \
	FuzzListening:./runner/points/peer/
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; pkg=$${t#*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s $$pkg; \
	done

clean:
	rm -rf bin out
