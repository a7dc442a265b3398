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

# staticcheck release verified against Go 1.26 (go install served by the
# module proxy). Bump deliberately, after checking `make lint` still passes.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck

.PHONY: help deps build test bench bench-dpdk hugepages fuzz lint demo demo-mem experiments clean

help:
	@echo "targets: deps build test bench bench-dpdk hugepages fuzz lint demo demo-mem experiments clean"
	@echo "  make bench BENCH=Link BENCHTIME=2s PKGS=./engine/..."
	@echo "  make fuzz FUZZTIME=30s"

deps:
	./scripts/install-deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/metaroce

# The protocol cores (metaroce/, rocev2/) must build and pass without cgo;
# the whole module is then tested with cgo as usual. MR_REQUIRE_ALL=1: a
# test that needs root or a tool (tshark) fails instead of skipping
# (test/internal/testenv), since deps installed everything.
test: deps
	$(GO) vet ./...
	MR_REQUIRE_ALL=1 CGO_ENABLED=0 $(GO) test ./metaroce/... ./rocev2/...
	MR_REQUIRE_ALL=1 $(GO) test -count=1 -timeout 15m ./...

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(if $(BENCHTIME),-benchtime $(BENCHTIME)) $(PKGS)

# 2 MiB hugepages for the DPDK data path (idempotent; HUGEPAGES=N pages).
hugepages:
	./scripts/setup-hugepages.sh $(HUGEPAGES)

# DPDK data-path benchmarks on hugepages: metaroce write_bw over memif
# against the raw memif packet rate in the same run (test/memifraw).
bench-dpdk: deps hugepages
	MR_HUGE=1 $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(if $(BENCHTIME),-benchtime $(BENCHTIME)) ./test/memifraw/

fuzz:
	./scripts/fuzz-all.sh $(FUZZTIME) $(PKGS)

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@v='($(patsubst v%,%,$(STATICCHECK_VERSION)))'; \
	have() { "$(STATICCHECK)" -version 2>/dev/null | grep -qF "$$v"; }; \
	if ! have; then \
		echo "installing staticcheck $(STATICCHECK_VERSION)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || true; \
	fi; \
	if have; then \
		echo "$(STATICCHECK) ./..."; "$(STATICCHECK)" ./...; \
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
	rm -rf bin out
	rm -f coverage.out coverage.html cpu.out mem.out
