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

.PHONY: all build test unit vet fmt-check conformance bench bench-load fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cli/cmd/gwdiag ./refproxy/cmd/refproxy ./refproxy/cmd/mockbackend

# The CI gate: static checks, unit and integration tests with the race detector,
# then the conformance suite against the reference proxy.
test: vet fmt-check unit conformance

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# The main job: every feature against the embedded in-process reference proxy.
conformance: build
	@start=$$(date +%s%N); \
	$(GWDIAG) conformance run --target inprocess --report $(REPORT) --junit conformance-junit.xml --cucumber-json conformance-cucumber.json; \
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

clean:
	rm -rf $(BIN) conformance-report.yaml conformance-junit.xml conformance-cucumber.json
