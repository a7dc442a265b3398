# metaroce make targets. `make help` lists them.
#
# `make test` and `make demo` install what they need themselves (as root):
# both depend on `deps`, which is a fast no-op once everything is installed.

GO        ?= go
BIN       := bin/metaroce
FUZZTIME  ?= 10s
BENCH     ?= .
BENCHTIME ?=
PKGS      ?= ./...
HUGEPAGES ?= 512

# DPDK is a build tag (dpdk/, mempool/, lcore/, engine/dpdkengine/ and the
# CLI's dpdk backend need cgo and libdpdk). DPDK=1 when pkg-config finds
# libdpdk (deps installs it), else 0; set DPDK=0 or 1 to force. Lazy (=):
# it is evaluated in recipes, after deps has run.
DPDK      ?= $(shell pkg-config --exists libdpdk 2>/dev/null && echo 1 || echo 0)
TAGS       = $(if $(filter 1,$(DPDK)),-tags dpdk)
# Packages `make test-race` runs under the race detector: the engines, the
# CLI and the simulator (dpdkengine only with the tag).
RACE_PKGS ?= ./engine/... ./cmd/metaroce/... ./sim/...

# staticcheck release verified against Go 1.26 (go install served by the
# module proxy). Bump deliberately, after checking `make lint` still passes.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck

.PHONY: FORCE help deps build verbs verbs-golib test test-nodpdk test-dpdk test-race bench bench-dpdk bench-afpacket bench-cells bench-verbs bench-security hugepages fuzz lint demo demo-mem experiments clean

help:
	@echo "targets: deps build verbs test test-nodpdk test-dpdk test-race bench bench-dpdk bench-afpacket bench-cells bench-verbs bench-security hugepages fuzz lint demo demo-mem experiments clean"
	@echo "  DPDK=0|1 builds without or with -tags dpdk (default: 1 when pkg-config finds libdpdk)"
	@echo "  make bench BENCH=Link BENCHTIME=2s PKGS=./engine/..."
	@echo "  make bench BENCH=PacketPath PKGS=./metaroce/   (metaroce per-packet cost: paths x streams x connections)"
	@echo "  make fuzz FUZZTIME=30s"

deps:
	./scripts/install-deps.sh

build:
	$(GO) build $(TAGS) -o $(BIN) ./cmd/metaroce

# The libibverbs.so.1-compatible library (libverbs/, docs/verbs.md):
# LD_LIBRARY_PATH=build/verbs runs an unmodified verbs program over
# metaroce. The C library is rdma-core v44's ABI (the version script);
# the Go transport beside it is loaded with dlopen at the first
# ibv_open_device. Needs gcc, cgo and libibverbs-dev's headers.
VERBS_DIR    := build/verbs
VERBS_C      := $(wildcard libverbs/src/*.c)
VERBS_H      := $(wildcard libverbs/src/*.h) cgo/mrg.h
VERBS_MAP    := libverbs/src/libibverbs.map
VERBS_CFLAGS ?= -O2 -g
VERBS_WARN   := -std=gnu11 -Wall -Wextra -Werror -fPIC

verbs: $(VERBS_DIR)/libibverbs.so.1 verbs-golib

$(VERBS_DIR)/libibverbs.so.1: $(VERBS_C) $(VERBS_H) $(VERBS_MAP)
	@mkdir -p $(VERBS_DIR)
	$(CC) $(VERBS_WARN) $(VERBS_CFLAGS) -Icgo -shared -o $@ -Wl,-soname,libibverbs.so.1 \
		-Wl,--version-script,$(VERBS_MAP) -Wl,-z,defs -Wl,-z,now $(VERBS_C) -ldl -lpthread

# The Go half. With DPDK=1 (libdpdk found) it has the DPDK backend too
# (backend: dpdk in the profile), as the CLI does: one Go runtime per
# process, so one build. go build recompiles the cgo packages of a
# c-shared build every time (with DPDK's headers, 15-20 s on two cores),
# so make decides: the module's non-test sources, and the tags
# (golib.tags changes only when they do).
VERBS_GOLIB := $(VERBS_DIR)/libmetaroce-verbs.so
GOLIB_SRC    = $(shell find . -path ./build -prune -o \( -name '*.go' -o -name '*.h' -o -name '*.c' \) \
		 -not -name '*_test.go' -print) go.mod go.sum

verbs-golib: $(VERBS_GOLIB)

$(VERBS_DIR)/golib.tags: FORCE
	@mkdir -p $(VERBS_DIR)
	@echo '$(TAGS)' | cmp -s - $@ || echo '$(TAGS)' > $@

$(VERBS_GOLIB): $(GOLIB_SRC) $(VERBS_DIR)/golib.tags
	CGO_ENABLED=1 $(GO) build $(TAGS) -buildmode=c-shared -o $@ ./libverbs/golib

FORCE:

# make test runs both ways: without the dpdk tag and without cgo (what a
# machine with no libdpdk builds and tests), then with the tag, the whole
# suite, DPDK tests included. MR_REQUIRE_ALL=1: a test that needs root or
# a tool (tshark) fails instead of skipping (test/internal/testenv), since
# deps installed everything.
test: deps
	@$(MAKE) --no-print-directory verbs
	@$(MAKE) --no-print-directory test-nodpdk
	@if [ "$(DPDK)" = 1 ]; then $(MAKE) --no-print-directory test-dpdk; \
	else echo "notice: DPDK=0 (pkg-config finds no libdpdk, or set so): the -tags dpdk tests did not run"; fi

# The kernel-fabric tests measure resends against the wire's own loss
# counters on a 2-core machine: they run after the rest, one package at a
# time, so that the suite's other packages do not stall their hosts (a
# stall of tens of milliseconds is a spurious timeout for any transport).
SERIAL_PKGS := ./test/kernelfabric ./test/fabricscript
PAR_PKGS     = $$($(GO) list $(1) ./... | grep -v -e '/test/kernelfabric$$' -e '/test/fabricscript$$')

test-nodpdk:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./...
	MR_REQUIRE_ALL=1 CGO_ENABLED=0 $(GO) test -count=1 -timeout 15m $(call PAR_PKGS,)
	MR_REQUIRE_ALL=1 CGO_ENABLED=0 $(GO) test -p 1 -count=1 -timeout 15m $(SERIAL_PKGS)

# test/verbslib runs the built library's programs, which the tag does not
# change (make verbs builds one Go half for both passes): with the tag
# only its DPDK tests run, not the rest a second time (about 2 minutes).
test-dpdk:
	$(GO) vet -tags dpdk ./...
	MR_REQUIRE_ALL=1 $(GO) test -tags dpdk -count=1 -timeout 15m $$($(GO) list -tags dpdk ./... | \
		grep -v -e '/test/kernelfabric$$' -e '/test/fabricscript$$' -e '/test/verbslib$$')
	MR_REQUIRE_ALL=1 $(GO) test -tags dpdk -count=1 -timeout 15m -run '^TestDPDK' ./test/verbslib
	MR_REQUIRE_ALL=1 $(GO) test -tags dpdk -p 1 -count=1 -timeout 15m $(SERIAL_PKGS)

# The race detector (needs cgo) over the engines, the CLI and the
# simulator; .ci/run runs it after make test.
test-race:
	MR_REQUIRE_ALL=1 $(GO) test -race $(TAGS) -count=1 -timeout 30m $(RACE_PKGS)

bench:
	$(GO) test $(TAGS) -run '^$$' -bench '$(BENCH)' -benchmem $(if $(BENCHTIME),-benchtime $(BENCHTIME)) $(PKGS)

# 2 MiB hugepages for the DPDK data path (idempotent; HUGEPAGES=N pages).
hugepages:
	./scripts/setup-hugepages.sh $(HUGEPAGES)

# DPDK data-path benchmarks on hugepages: metaroce write_bw over memif
# against the raw memif packet rate in the same run (test/memifraw).
bench-dpdk: deps hugepages
	MR_HUGE=1 $(GO) test -tags dpdk -run '^$$' -bench '$(BENCH)' -benchmem $(if $(BENCHTIME),-benchtime $(BENCHTIME)) ./test/memifraw/

# The af_packet ceiling (root): the raw af_packet pair of test/memifraw,
# no transport, on a veth pair in a namespace the test builds, frames/s
# at the cells' frame sizes, the kernel's receive dropped as in
# bench-cells (MR_RAW_KERNEL_RX=on keeps it).
bench-afpacket: deps
	MR_RAW_AFPACKET=1 $(GO) test -tags dpdk -run '^$$' -bench 'RawAfPacket' -benchtime $(or $(BENCHTIME),400000x) -count $(or $(COUNT),3) ./test/memifraw/

# The verbs library against the native Go path, side by side (issue 14):
# Debian's ib_write_bw and ib_send_lat through build/verbs against
# metaroce perf write_bw and send_lat, interleaved, medians and ratios
# (scripts/verbs-ab.sh; docs/verbs.md "Performance"). VERBS_AB_ARGS="--runs 9".
bench-verbs: build verbs
	./scripts/verbs-ab.sh --bin $(BIN) $(VERBS_AB_ARGS)

# What the sealed modes cost: perf write_bw in security.mode none, auth and
# encrypt over UDP loopback and memif, interleaved, medians and ratios
# (docs/security.md). SECURITY_AB_ARGS="--runs 7 --backends udp".
bench-security: build
	./scripts/security-ab.sh --bin $(BIN) $(SECURITY_AB_ARGS)

# The four cells of issue 16 (64 B ping-pong, 64 B x32 message rate,
# 32 KiB x8 and 1 MiB x2 goodput) for metaroce and rocev2 over memif and
# af_packet/veth, two pinned processes, 3 runs, medians, one table
# (scripts/dpdk-cells.sh --help). CELLS_ARGS adds options, e.g.
# CELLS_ARGS="--other 'CMD {role} {size} {outstanding} ...' --other-name X".
CELLS_ARGS ?=
bench-cells: deps hugepages
	$(GO) build -tags dpdk -o $(BIN) ./cmd/metaroce
	./scripts/dpdk-cells.sh --bin $(BIN) $(CELLS_ARGS)

fuzz:
	GOFLAGS='$(strip $(GOFLAGS) $(if $(TAGS),-tags=dpdk))' ./scripts/fuzz-all.sh $(FUZZTIME) $(PKGS)

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi
	CGO_ENABLED=0 $(GO) vet ./...
	$(if $(TAGS),$(GO) vet $(TAGS) ./...)
	@v='($(patsubst v%,%,$(STATICCHECK_VERSION)))'; \
	have() { "$(STATICCHECK)" -version 2>/dev/null | grep -qF "$$v"; }; \
	if ! have; then \
		echo "installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || true; \
	fi; \
	if have; then \
		echo "CGO_ENABLED=0 $(STATICCHECK) ./..."; CGO_ENABLED=0 "$(STATICCHECK)" ./... || exit 1; \
		if [ -n "$(TAGS)" ]; then echo "$(STATICCHECK) $(TAGS) ./..."; "$(STATICCHECK)" $(TAGS) ./... || exit 1; fi; \
	else \
		echo "notice: staticcheck $(STATICCHECK_VERSION) could not be installed from the module proxy; skipping it"; \
	fi

# The embedded default profile (configs/loopback-udp.yaml): metaroce
# against rocev2 over UDP loopback with 0% and 1% injected loss, perftest
# tables, the side-by-side table and the plot (out/demo-bench.png).
# Hugepages are reserved for the DPDK backend (best effort; UDP needs none).
demo: deps build
	@./scripts/setup-hugepages.sh $(HUGEPAGES)
	@mkdir -p out
	./$(BIN) bench --set bench.plot=out/demo-bench.png

# The in-memory lossy-link demo (virtual time, modelled link).
demo-mem: build
	./$(BIN) demo

# Every simulator experiment (configs/experiments/*.yaml), full size: a
# table per experiment on stdout (and out/<experiment>.txt), and CSV, JSON
# lines and PNG plots in out/. EXPERIMENTS=... runs a subset.
EXPERIMENTS ?= $(wildcard configs/experiments/*.yaml)
experiments: build
	@mkdir -p out
	@set -e; for f in $(EXPERIMENTS); do \
		n=$$(basename $$f .yaml); \
		start=$$(date +%s); \
		./$(BIN) sim $$f --out out | tee out/$$n.txt; \
		echo "($$n: $$(( $$(date +%s) - start ))s wall)"; echo; \
	done

clean:
	rm -rf bin out build
	rm -f coverage.out coverage.html cpu.out mem.out
