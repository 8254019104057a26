# gwdiag: conformance suite, reference proxy and CLI for gateway-proxy diagnostics.
# Every target installs or builds what it needs: Go modules, binaries built from them,
# and Debian packages through apt-get where a target needs one (bench-load, redis-server, chromium).

GO        ?= go
BIN       := .bin
GWDIAG    := $(BIN)/gwdiag
REFPROXY  := $(BIN)/refproxy
MOCK      := $(BIN)/mockbackend
REPORT    ?= conformance-report.yaml
PKGS      := ./...

.PHONY: all build image test debian-packages unit test-times vet fmt-check conformance bench bench-load bench-instr fuzz clean kube-bins ratelimit-bin jaeger-bin redis-server chromium test-cluster test-node conformance-cluster generate-crds

all: build

# The revision gwdiag reports (version, conformance reports), whatever GOFLAGS
# says of -buildvcs; empty outside a git checkout.
REVISION := $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$r || echo $$r+dirty; })
LDFLAGS  := -s -w -X github.com/gwdiag/gwdiag/cli/internal/versioncmd.revision=$(REVISION)

# One configuration for everything compiled without the race detector:
# static binaries (no cgo; gwdiag builds the container target's mock image
# FROM scratch from itself), go vet, the fault catalogue's tests, the
# static programs the tests build (toolbin.StaticEnv and StaticFlags, which
# TestMakefileStaticFlags holds these to), the Kubernetes binaries. Go's
# build cache then compiles each package once for all of them, and
# -trimpath keys it by content, not by the checkout's path.
STATIC_ENV   := CGO_ENABLED=0
STATIC_FLAGS := -trimpath -buildvcs=false

build:
	$(STATIC_ENV) $(GO) build $(STATIC_FLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cli/cmd/gwdiag ./refproxy/cmd/refproxy ./steps/mock/cmd/mockbackend

# The reference proxy as an image, FROM scratch from its static binary:
# no RUN steps and no registry (refproxy/Dockerfile).
IMAGE ?= gwdiag/refproxy:dev
image:
	$(STATIC_ENV) $(GO) build $(STATIC_FLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/static/refproxy ./refproxy/cmd/refproxy
	docker build -q -f refproxy/Dockerfile -t $(IMAGE) $(BIN)/static
	@docker image inspect -f '$(IMAGE): {{.Size}} bytes' $(IMAGE)

# The CI gate: static checks, unit and integration tests with the race detector,
# then the conformance suite against the reference proxy.
# Debian's packages (redis-server, chromium: half a minute on a fresh
# machine, network and disk more than CPU) install while vet compiles.
test:
	@$(MAKE) --no-print-directory -j2 vet debian-packages
	@$(MAKE) --no-print-directory fmt-check unit conformance

# One apt-get at a time: two would meet on dpkg's lock.
debian-packages:
	@{ $(call debian,redis-server,redis-server,); } && { $(call debian,chromium,chromium,--no-install-recommends); }

# In the static configuration (STATIC_FLAGS), as the fault catalogue's test
# binary (./steps, most of the module's packages) and the static programs
# build: they reuse vet's compile (vet -race would move the compile to the
# catalogue, not save it; docs/ci.md). No package of the module uses cgo.
#
# Then again for macOS: operators run gwdiag there (trace, config, and
# conformance against a process, a container, kind or a kubeconfig; only
# the local node is Linux's), so every package must build for it.
vet:
	$(STATIC_ENV) $(GO) vet $(STATIC_FLAGS) $(PKGS)
	GOOS=darwin GOARCH=arm64 $(STATIC_ENV) $(GO) vet $(STATIC_FLAGS) $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff > /dev/null 2>&1 || { echo "go.mod or go.sum is not tidy (go mod tidy):"; $(GO) mod tidy -diff; exit 1; }

# kube-bins and ratelimit-bin first: cold builds take minutes and must not
# count against a test binary's timeout. TEST_P test binaries run at once,
# and TEST_PARALLEL parallel tests in each (many wait on proxies, containers
# or a cluster). More of either overloads 2 cores: at 3 and 4, the suite's
# rate-limit windows passed before their requests ended (docs/ci.md); 2 and 2
# is go test's own default here, with the tests now marked parallel.
# gotestsum (a tool of go.mod) prints a line per package as it ends and
# keeps go test's JSON in $(TESTJSON); test-times reads it.
TEST_P        ?= 2
TEST_PARALLEL ?= 2
TESTJSON      ?= $(BIN)/test-unit.json
# The longest test binaries start first (go test runs packages in the order
# given; ./... adds the rest, each once): started last, ./steps alone was the
# run's last 213 s while the local-node chain had ended (docs/ci.md). Then
# the next longest, slowest first (the warm run of 2026-12-01, seconds of
# wall): the alphabetical rest ended 250 s after the four, with the process
# target's 32 s started last. The local node's own tests (kubeenv, node, the
# controller's data plane) wait for the machine's node lock, so a package
# that needs none goes between them.
TEST_FIRST    ?= ./steps ./cli/e2e ./clusters ./steps/targets/container \
	./clusters/kube/kubeenv ./steps/targets/process ./clusters/kube/node \
	./refproxy/e2e ./clusters/controller ./cli/internal/tracecmd ./cli/internal/connect \
	./steps/targets/cluster ./refproxy ./clusters/kube ./clusters/kube/kind \
	./cli/internal/configcmd ./refproxy/internal/proxy ./golden/trace ./steps/reportview
# The fault catalogue (TestSuiteCatchesFaults: every fault against the whole
# suite in process; TestProcessTargetCatchesFaults: every fault a process can
# run, in front of refproxy as a process, on the scenarios it must fail, with
# their bundles checked and replayed) runs in a go test of its own without
# -race, beside the rest, one fault at a time; the -race run takes a sample of
# both that changes every day ($$GWDIAG_CATALOGUE=race-sample; test-times
# prints which) and runs TestContainerTargetCatchesFaults (every fault on the
# container target: it waits on Docker more than it computes). The race
# detector doubled the catalogue's time, and it was a third of ./steps'.
TESTJSON_CATALOGUE ?= $(BIN)/test-catalogue.json
# Each test binary runs under .ci/testcpu, which ends its output with the CPU
# it and the processes it waited for used: on 2 cores the gate's wall time
# follows its CPU time, and test-times prints where it went.
TEST_EXEC ?= -exec $(CURDIR)/.ci/testcpu
# What the whole machine used over the tests (.ci/machinecpu before and
# after): beside the test binaries' own CPU, test-times prints the rest
# (go test's compiles and links, the containers' processes, the kernel;
# docs/ci.md).
TESTMACHINE ?= $(BIN)/test-machine.txt
# A test binary's -timeout guards against a hang, not against slowness: on
# a fresh machine the tests' own go builds (gwdiag, refproxy, images)
# compile from an empty cache beside every other binary's, and ./cli/e2e
# took 1429 s there (2026-11-30), past the 20 m this was.
TEST_TIMEOUT ?= 45m
# The test binaries are linked without DWARF (-w): go test links each of its
# 68 binaries anew every run, and without it a link of a large one (./steps,
# ./clusters, ./cli/e2e: Kubernetes' client in it) took 1.3 to 2.2 s less
# CPU of 6 to 9 (-race, 2026-12-04, docs/ci.md). Stack traces, the race
# detector's reports and pprof read the symbol table, which -w keeps; set
# TEST_LDFLAGS= to run the tests under a debugger.
TEST_LDFLAGS ?= -w
# Jaeger (one test of ./cli/internal/tracecmd, late in the race run, queries it) is
# built beside the tests, not before them: cold, its build was 3.3 of the
# 10.8 minutes before the first test on a fresh machine (2026-12-06), while
# the tests' own compiles left cores idle. The test waits for it on the
# build's lock in .bin (toolbin.Build) and finds it fresh; warm, the build
# is a check of seconds. Its output is in $(BIN)/jaeger-bin.log, and a
# failed build fails make unit.
unit: kube-bins ratelimit-bin redis-server chromium
	@mkdir -p $(BIN)
	@.ci/machinecpu > $(TESTMACHINE) || true
	@$(MAKE) --no-print-directory jaeger-bin > $(BIN)/jaeger-bin.log 2>&1 & jaeger=$$!; \
	$(STATIC_ENV) $(GO) tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --hide-summary output \
	  --jsonfile $(TESTJSON_CATALOGUE) -- $(STATIC_FLAGS) -ldflags='$(TEST_LDFLAGS)' $(TEST_EXEC) -count=1 -timeout $(TEST_TIMEOUT) -parallel 1 -run '^(TestSuiteCatchesFaults|TestProcessTargetCatchesFaults)$$' ./steps & cat=$$!; \
	GWDIAG_CATALOGUE=race-sample $(GO) tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --hide-summary output \
	  --jsonfile $(TESTJSON) -- $(TEST_EXEC) -race -ldflags='$(TEST_LDFLAGS)' -count=1 -timeout $(TEST_TIMEOUT) -p $(TEST_P) -parallel $(TEST_PARALLEL) $(TEST_FIRST) $(PKGS); \
	rc=$$?; wait $$cat || rc=1; \
	wait $$jaeger || { echo "make jaeger-bin failed ($(BIN)/jaeger-bin.log):"; cat $(BIN)/jaeger-bin.log; rc=1; }; \
	.ci/machinecpu >> $(TESTMACHINE); $(MAKE) --no-print-directory test-times; exit $$rc

# Where the time of the last make test (or make unit) went: the slowest
# packages, then the slowest tests (top-level and subtests), from $(TESTJSON).
# Package times overlap: TEST_P of them run at once.
TIMES_TOP ?= 15
test-times:
	@test -s $(TESTJSON) || { echo "no $(TESTJSON): run make unit first"; exit 2; }
	@cat $(TESTJSON) $(wildcard $(TESTJSON_CATALOGUE)) > $(BIN)/test-all.json
	@grep -Eho '(process target: )?fault catalogue[^"]*' $(BIN)/test-all.json | sed 's/\\n$$//; s/^/  /' || true
	@echo "slowest packages (seconds; $(TEST_P) run at once, and the catalogue without -race beside them):"
	@grep -E '"Action":"(pass|fail)","Package":"[^"]*","Elapsed":' $(BIN)/test-all.json | \
	  sed -E 's/.*"Action":"([a-z]+)","Package":"([^"]*)","Elapsed":([0-9.]+).*/\3 \2 \1/' | \
	  sed 's| github.com/gwdiag/gwdiag/\{0,1\}| ./|' | sort -rn | head -$(TIMES_TOP) | \
	  awk '{printf "  %8.1f  %s%s\n", $$1, $$2, ($$3 == "fail" ? "  FAIL" : "")}'
	@echo "CPU by test binary (seconds, user+sys, with the processes each waited for; not the Docker daemon's):"
	@for f in $(TESTJSON) $(wildcard $(TESTJSON_CATALOGUE)); do \
	  tag=; [ $$f = $(TESTJSON_CATALOGUE) ] && tag=" (catalogue, no -race)"; \
	  grep -h '"Output":"gwdiag-test-cpu: ' $$f | \
	  sed -E 's/.*"Package":"([^"]*)".*gwdiag-test-cpu: ([0-9.]+) s wall, ([0-9.]+) s user, ([0-9.]+) s sys.*/\1 \2 \3 \4/' | \
	  awk -v tag="$$tag" '{ sub("github.com/gwdiag/gwdiag/?", "./", $$1); printf "%.1f %.1f %s%s\n", $$3 + $$4, $$2, $$1, tag }'; \
	done | sort -rn | awk -v m=$(TESTMACHINE) -v cores="$$(nproc)" '{ t += $$1; if (NR <= $(TIMES_TOP)) printf "  %8.1f  (%6.1f wall)  %s\n", $$1, $$2, substr($$0, index($$0, $$3)) } \
	  END { printf "  %8.1f  in all\n", t; \
	    if ((getline a < m) > 0 && (getline b < m) > 0) { split(a, x); split(b, y); \
	      printf "the machine over the tests: %.0f s of wall; %.0f s of CPU busy of %.0f (%d cores); the test binaries %.0f s, dockerd and containerd %.0f s, the rest (the compiles and links of go test, the containers, the kernel) %.0f s\n", \
	        y[1] - x[1], y[2] - x[2], (y[1] - x[1]) * cores, cores, t, y[3] - x[3], (y[2] - x[2]) - t - (y[3] - x[3]) } }'
	@echo "slowest tests (over 20 s):"
	@$(GO) tool gotestsum tool slowest --jsonfile $(BIN)/test-all.json --threshold 20s | head -40 | sed 's|github.com/gwdiag/gwdiag/|./|; s/^/  /'

# The main job: every feature against the reference proxy, which claims every
# extended feature: anything less than all passed fails. TARGET=inprocess (the
# default) embeds it; TARGET=process runs its binary; TARGET=container runs its
# image (built by make image) with the mock backends in containers beside it.
TARGET ?= inprocess
TARGET_FLAGS_inprocess :=
TARGET_FLAGS_process   := --proxy-cmd '$(CURDIR)/$(REFPROXY) --bind-host 127.0.0.1 -f {config}'
TARGET_FLAGS_container := --image $(IMAGE) --pull never
conformance: build ratelimit-bin redis-server $(if $(filter container,$(TARGET)),image)
	@start=$$(date +%s%N); \
	$(GWDIAG) conformance run --target $(TARGET) $(TARGET_FLAGS_$(TARGET)) --all-features --report $(REPORT) --junit conformance-junit.xml --cucumber-json conformance-cucumber.json; \
	rc=$$?; end=$$(date +%s%N); \
	echo "conformance wall time: $$(( (end - start) / 1000000 ))ms"; exit $$rc

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# refproxy against nginx; WATCHERS=1: refproxy with and without gwdiag follow
# watchers (refproxy/bench/load.sh says what else may be set).
WATCHERS ?= 0
bench-load:
	WATCHERS=$(WATCHERS) ./refproxy/bench/load.sh

# Instructions per iteration of one benchmark, under callgrind (noise-free
# figures for small changes; refproxy/bench/instr.sh).
INSTR_PKG ?= ./refproxy/internal/proxy
INSTR_BENCH ?= BenchmarkServe/outcome-dropped$$
INSTR_FUNC ?= (*bindHandler).serve
bench-instr:
	./refproxy/bench/instr.sh '$(INSTR_PKG)' '$(INSTR_BENCH)' '$(INSTR_FUNC)'

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./refproxy/config
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./refproxy/internal/logfilter
	$(GO) test -run '^$$' -fuzz FuzzPrepareRequest -fuzztime $(FUZZTIME) ./refproxy/internal/llm
	$(GO) test -run '^$$' -fuzz FuzzJSONUsage -fuzztime $(FUZZTIME) ./refproxy/internal/llm
	$(GO) test -run '^$$' -fuzz FuzzSSEUsage -fuzztime $(FUZZTIME) ./refproxy/internal/llm
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime $(FUZZTIME) ./golden/trace/sse
	$(GO) test -run '^$$' -fuzz FuzzParseIETF -fuzztime $(FUZZTIME) ./steps/stepdefs
	$(GO) test -run '^$$' -fuzz FuzzParseTraceparent -fuzztime $(FUZZTIME) ./golden/trace/otlp
	$(GO) test -run '^$$' -fuzz FuzzAppendUnquoted -fuzztime $(FUZZTIME) ./golden/trace/jsonscan
	$(GO) test -run '^$$' -fuzz FuzzEscape -fuzztime $(FUZZTIME) ./golden/termtext
	$(GO) test -run '^$$' -fuzz FuzzExplain -fuzztime $(FUZZTIME) ./golden/trace/explain
	$(GO) test -run '^$$' -fuzz FuzzIETFFields -fuzztime $(FUZZTIME) ./refproxy/ratelimit
	for f in FuzzAppendEvent FuzzMayRedact FuzzAppendParsed FuzzAppendText FuzzCapture; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./golden/trace/redact || exit 1; done

# kube-apiserver, etcd, kubelet, kube-controller-manager and kube-scheduler for
# the cluster tests and the local node, built into $(BIN) from the nested module
# clusters/kube/tools (so the main module never requires k8s.io/kubernetes).
# Idempotent: up-to-date binaries are kept; cold about 4 min on 2 cores after
# make vet (which compiles what they share with gwdiag; docs/ci.md), warm seconds.
# go run in the static configuration too: kubebins imports client-go and
# 550 other packages, which vet has compiled in it.
kube-bins:
	$(STATIC_ENV) $(GO) run $(STATIC_FLAGS) ./clusters/kube/cmd/kubebins -node

# The global rate-limit tests run github.com/envoyproxy/ratelimit, built from
# the tools module steps/ratelimitsvc/tools, on Debian's redis-server.
ratelimit-bin:
	$(STATIC_ENV) $(GO) run $(STATIC_FLAGS) ./steps/ratelimitsvc/cmd/ratelimitbin

# Jaeger's all-in-one program, built from the tools module
# steps/jaegersvc/tools: the tracing backend the OpenTelemetry tests query
# (docs/otlp.md). Cold about 5 min on 2 cores, warm seconds.
jaeger-bin:
	$(STATIC_ENV) $(GO) run $(STATIC_FLAGS) ./steps/jaegersvc/cmd/jaegerbin

# $(call debian,COMMAND,PACKAGE,APT-GET FLAGS): installs Debian's PACKAGE
# with apt-get (sudo when not root) unless COMMAND is on the PATH.
debian = command -v $(1) >/dev/null || { s=; [ "$$(id -u)" = 0 ] || s=sudo; \
	  echo "installing $(2) (apt-get)"; \
	  DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -q $(3) $(2) >/dev/null 2>&1 || \
	  { $$s apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -q $(3) $(2) >/dev/null; }; }

redis-server:
	@$(call debian,redis-server,redis-server,)

# Debian's chromium: steps/reportview renders the HTML report in it.
chromium:
	@$(call debian,chromium,chromium,--no-install-recommends)

# The cluster tests: CRD validation, the reference controller and the
# condition-status scenarios, each against a real local kube-apiserver.
test-cluster: kube-bins
	@start=$$(date +%s%N); \
	$(GO) test -race -count=1 -timeout 30m ./clusters/... && \
	$(GO) test -race -count=1 -run 'TestCluster' ./steps/; \
	rc=$$?; end=$$(date +%s%N); \
	echo "test-cluster wall time: $$(( (end - start) / 1000000 ))ms"; exit $$rc

# The local node alone (also part of make test): containerd, runc and the CNI
# plugins from Debian's packages, the whole single-node cluster, its clean-up
# and the sweep after a killed run. Needs root (skipped otherwise).
test-node: kube-bins
	$(GO) test -race -count=1 -v ./clusters/kube/node/

# The cluster profile through the gwdiag binary (static, from make build), on a
# single-node cluster this machine starts (root): the reference controller in-process
# deploys refproxy in pods, packed from $(REFPROXY); the mock backends run in pods
# packed from gwdiag itself. CLUSTER=local runs the API-server-only mode instead
# (condition status only; the traffic features are skipped, saying why). CLUSTER=kind
# creates a kind cluster instead (Docker and a pullable node image; no kube-bins needed).
CLUSTER ?= local-node
conformance-cluster: build $(if $(filter kind,$(CLUSTER)),,kube-bins)
	@start=$$(date +%s%N); \
	GWDIAG_KUBE_BIN=$(CURDIR)/$(BIN) $(GWDIAG) conformance run --target cluster -c clusters/examples/$(CLUSTER).yaml \
	  --refproxy-binary $(CURDIR)/$(REFPROXY) --report $(REPORT) --junit conformance-junit.xml; \
	rc=$$?; end=$$(date +%s%N); \
	echo "conformance-cluster ($(CLUSTER)) wall time: $$(( (end - start) / 1000000 ))ms"; exit $$rc

# Regenerate the GatewayPolicy CRD and deepcopy code from clusters/api.
CONTROLLER_GEN ?= sigs.k8s.io/controller-tools/cmd/controller-gen@v0.22.0
generate-crds:
	$(GO) run $(CONTROLLER_GEN) object paths=./clusters/api/... crd:crdVersions=v1 output:crd:dir=./clusters/crds

clean:
	rm -rf $(BIN) conformance-report.yaml conformance-junit.xml conformance-cucumber.json
