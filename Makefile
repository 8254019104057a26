# gwdiag: conformance suite, reference proxy and CLI for gateway-proxy diagnostics.
# Every target installs or builds what it needs: Go modules, binaries built from them,
# and Debian packages through apt-get where a target needs one (bench-load).

GO        ?= go
BIN       := .bin
GWDIAG    := $(BIN)/gwdiag
REFPROXY  := $(BIN)/refproxy
MOCK      := $(BIN)/mockbackend
REPORT    ?= conformance-report.yaml
PKGS      := ./...

.PHONY: all build test unit vet fmt-check conformance bench bench-load fuzz clean kube-bins test-cluster conformance-cluster generate-crds

all: build

# The revision gwdiag reports (version, conformance reports), whatever GOFLAGS
# says of -buildvcs; empty outside a git checkout.
REVISION := $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$r || echo $$r+dirty; })
LDFLAGS  := -X github.com/gwdiag/gwdiag/cli/versioncmd.revision=$(REVISION)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cli/cmd/gwdiag ./refproxy/cmd/refproxy ./refproxy/cmd/mockbackend

# The CI gate: static checks, unit and integration tests with the race detector,
# then the conformance suite against the reference proxy.
test: vet fmt-check unit conformance

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# kube-bins first: a cold build of kube-apiserver and etcd takes minutes and
# must not count against a test binary's timeout.
unit: kube-bins
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# The main job: every feature against the embedded in-process reference proxy,
# which claims every extended feature: anything less than all passed fails.
conformance: build
	@start=$$(date +%s%N); \
	$(GWDIAG) conformance run --target inprocess --all-features --report $(REPORT) --junit conformance-junit.xml --cucumber-json conformance-cucumber.json; \
	rc=$$?; end=$$(date +%s%N); \
	echo "conformance wall time: $$(( (end - start) / 1000000 ))ms"; exit $$rc

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

bench-load:
	./refproxy/bench/load.sh

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./refproxy/config
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./refproxy/logfilter
	$(GO) test -run '^$$' -fuzz FuzzPrepareRequest -fuzztime $(FUZZTIME) ./refproxy/llm
	$(GO) test -run '^$$' -fuzz FuzzJSONUsage -fuzztime $(FUZZTIME) ./refproxy/llm
	$(GO) test -run '^$$' -fuzz FuzzSSEUsage -fuzztime $(FUZZTIME) ./refproxy/llm
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime $(FUZZTIME) ./refproxy/trace/sse

# kube-apiserver and etcd for the cluster tests, built into $(BIN) from the nested
# module clusters/kube/tools (so the main module never requires k8s.io/kubernetes).
# Idempotent: up-to-date binaries are kept; cold about 7-10 min on 2 cores, warm seconds.
kube-bins:
	$(GO) run ./clusters/kube/cmd/kubebins

# The cluster tests: CRD validation, the reference controller and the
# condition-status scenarios, each against a real local kube-apiserver.
test-cluster: kube-bins
	@start=$$(date +%s%N); \
	$(GO) test -race -count=1 -timeout 30m ./clusters/... && \
	$(GO) test -race -count=1 -run 'TestCluster' ./steps/; \
	rc=$$?; end=$$(date +%s%N); \
	echo "test-cluster wall time: $$(( (end - start) / 1000000 ))ms"; exit $$rc

# The condition-status scenarios through the gwdiag binary, on a local API server
# with the reference controller in-process.
conformance-cluster: build kube-bins
	GWDIAG_KUBE_BIN=$(CURDIR)/$(BIN) $(GWDIAG) conformance run --target cluster -c clusters/examples/local.yaml

# Regenerate the GatewayPolicy CRD and deepcopy code from clusters/api.
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.22.0
generate-crds:
	$(GO) run $(CONTROLLER_GEN) object paths=./clusters/api/... crd:crdVersions=v1 output:crd:dir=./clusters/crds

clean:
	rm -rf $(BIN) conformance-report.yaml conformance-junit.xml conformance-cucumber.json
