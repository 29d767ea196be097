# rdmasweep — see README.md.
#
#   make build      bin/runner and bin/node (the RDMA node when libibverbs is installed)
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

.PHONY: build runner node node-tcp node-rdma demo readme-plot test test-stub test-rdma-link bench fuzz clean

# build says which transports the node got, and why not rdma when it did
# not: a tcp-only node still runs every plan with transport: tcp.
build: runner node
	@bin/node version
ifneq ($(HAVE_IBVERBS),yes)
	@echo "bin/node has no rdma transport: missing $(or $(RDMA_MISSING),pkg-config data for librdmacm/libibverbs); make node-rdma says what to install" >&2
endif

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
test-rdma-link:
	CGO_ENABLED=1 $(GO) vet -tags 'rdma rdmaguest bench' ./node/...
	CGO_ENABLED=1 CGO_LDFLAGS="$(RDMA_LDFLAGS)" \
		$(GO) test -count=1 -tags 'rdma netgo osusergo' \
		-ldflags '-linkmode external -extldflags "-static"' ./node/transport/rdma/

ifeq ($(HAVE_IBVERBS),yes)
test: build test-stub test-rdma-link
else
test: build test-stub
endif
	$(GO) vet ./...
	$(GO) vet -tags bench ./...   # the benchmarks build, though make test does not run them
	$(GO) test -count=1 -timeout 45m ./...

# The side-by-side benchmarks of docs/performance.md. The peers are plans
# run by the runner itself: bench-tcp here on loopback (node beside
# iperf3); bench-rdma (node beside ib_read_bw) and bench-ssd (fio beside
# node's pinned registration) in the soft-RoCE guest. Then the benchmarks
# that are not peers: the SFTP uploader beside OpenSSH's sftp and the
# runner's overhead per point. Last, each plan's summary with its ratios.
BENCH_OUT ?= out/bench
bench: build
	rm -rf $(BENCH_OUT) && mkdir -p $(BENCH_OUT)
	bin/runner exec plans/bench-tcp.yaml --out $(BENCH_OUT)/bench-tcp.csv --set output.logs=$(BENCH_OUT)/logs
	RDMASWEEP_BENCH_OUT=$(abspath $(BENCH_OUT)) $(if $(filter yes,$(HAVE_IBVERBS)),RDMASWEEP_NODE=$(abspath bin/node)) \
		$(GO) test -count=1 -tags bench -run 'Bench' -v -timeout 40m ./runner/... ./node/transport/rdma/vmtest/
	@for p in bench-tcp:iperf3 bench-rdma:ib_read_bw bench-ssd:fio; do \
		csv=$(BENCH_OUT)/$${p%%:*}.csv; [ -f $$csv ] || continue; echo "== $${p%%:*}"; \
		bin/runner summary --baseline workload=$${p#*:} $$csv; done

# Fuzz one target at a time for FUZZTIME each; `make test` already runs
# every committed corpus as ordinary tests.
FUZZ_TARGETS := FuzzLoad:./plan/ FuzzDecode:./results/ FuzzServeRequests:./node/transport/tcp/ \
	FuzzDecodeEndpoint:./node/transport/rdma/ FuzzServerHandshake:./node/transport/rdma/ \
	FuzzParseIBReadBW:./runner/peer/ FuzzParseIperf3:./runner/peer/ FuzzParseFio:./runner/peer/ \
	FuzzListening:./runner/peer/
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; pkg=$${t#*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s $$pkg; \
	done

clean:
	rm -rf bin out
