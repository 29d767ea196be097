# rdmasweep — see README.md.
#
#   make build      bin/runner and bin/node (the RDMA node when libibverbs is installed)
#   make demo       run plans/loopback.yaml: both roles here, tcp
#   make test       every test (as root, for the namespace hosts and the soft-RoCE guest)
#   make bench      the side-by-side benchmarks, printed with their ratios
#   make fuzz       fuzz each target for FUZZTIME

GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 30s
X        := -X main.version=$(VERSION)
HAVE_IBVERBS := $(shell pkg-config --exists libibverbs 2>/dev/null && test -e "$$(pkg-config --variable=libdir libibverbs)/libibverbs.a" && echo yes)

.PHONY: build runner node node-tcp node-rdma demo test test-stub bench fuzz clean

build: runner node

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

# A static node with libibverbs and every rdma-core provider linked in, so
# it finds mlx5, rxe, efa, … on hosts without rdma-core installed.
node-rdma:
	CGO_ENABLED=1 CGO_LDFLAGS="$$(pkg-config --static --libs libibverbs)" \
		$(GO) build -tags 'rdma netgo osusergo' \
		-ldflags '$(X) -linkmode external -extldflags "-static"' -o bin/node ./node
	@file bin/node | grep -q 'statically linked' || { echo 'bin/node is not statically linked' >&2; exit 1; }

demo: build
	bin/runner exec plans/loopback.yaml

# The stub build (no cgo) is vetted and tested too, so it never rots.
test-stub:
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./node/...

test: build test-stub
	$(GO) vet ./...
ifeq ($(HAVE_IBVERBS),yes)
	CGO_ENABLED=1 $(GO) vet -tags rdma ./node/...
endif
	$(GO) test -count=1 -timeout 45m ./...

bench: build
	$(GO) test -count=1 -tags bench -run 'Bench' -v -timeout 30m ./node/transport/tcp/ ./runner/... ./node/transport/rdma/...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./plan/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./results/

clean:
	rm -rf bin out
