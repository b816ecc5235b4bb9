# Spillway — make targets. `make` alone lists them.
SHELL := /bin/bash
GO ?= go
PKGS := ./...
STATICCHECK_VERSION := v0.8.2
BIN := $(CURDIR)/bin
FUZZTIME ?= 30s
# Per test binary: the simulations (fleet, steady, e2e) take minutes under -race
# on 2 cores, and the default 10 minutes leaves too little headroom.
TEST_TIMEOUT ?= 30m
# The version `spillway version` prints: the nearest tag, commits since, and
# the commit (git describe), or "dev" outside a git checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: tools vet ## go vet, then every test with -race (library, functions under the Lambda emulator, CLI, the fleet simulation, the CDK stack), then the lab's studies and the fleet's seed replay without it.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestStudies$$' $(PKGS)
	# A fleet seed replays exactly only without the race detector, which
	# perturbs the scheduler on purpose: the replay test runs once without it.
	# The studies recompute docs/lab on one simulated P, code the packages'
	# own tests race-check: without the detector they take minutes, not tens.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestSeedReplaysExactly|TestStudies' ./internal/fleetsim ./internal/lab
	@if [ -d infra ]; then $(MAKE) test-infra; fi

# DynamoDB Local (AWS's own DynamoDB, a Java server): fetched once into
# ~/.cache/spillway by scripts/ddblocal, version pinned and checksummed, never
# committed (AWS-licensed). The packages whose tests talk to DynamoDB run
# against it as well as against the embedded server.
DDB_PKGS := ./outbox/outboxlocal ./outbox/outboxddb ./outbox/outboxinbox ./outbox/outboxwake ./outbox/outboxlambda \
	./outbox/outboxobs/ddbusage ./internal/e2e ./internal/relayproc ./functions/... ./cmd/spillway

.PHONY: ddblocal
ddblocal: ## Start DynamoDB Local on a free loopback port (fetched once, pinned, checksummed); prints the endpoint for SPILLWAY_DYNAMODB_ENDPOINT.
	@scripts/ddblocal start

.PHONY: ddblocal-stop
ddblocal-stop: ## Stop the DynamoDB Local that `make ddblocal` started.
	@scripts/ddblocal stop

.PHONY: test-ddblocal
test-ddblocal: tools ## Every test that touches DynamoDB, against a DynamoDB Local of its own (started, then stopped); needs java and npm.
	scripts/ddblocal run $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(DDB_PKGS)

.PHONY: vet
vet: ## go vet over both modules.
	$(GO) vet $(PKGS)
	@if [ -d infra ]; then cd infra && $(GO) vet ./...; fi

.PHONY: test-infra
test-infra: infra/node_modules ## Synthesize the CDK stack in tests (needs node; installs the CDK CLI locally).
	cd infra && $(GO) test -count=1 ./...

infra/node_modules: infra/package.json
	npm ci --prefix infra --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: lint
lint: $(BIN)/staticcheck ## gofmt, go vet and staticcheck.
	@out=$$(find . -name '*.go' -not -path './infra/node_modules/*' -not -path './bin/*' -print0 | xargs -0 gofmt -l); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(MAKE) vet
	$(BIN)/staticcheck $(PKGS)
	cd infra && $(BIN)/staticcheck ./...

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s).
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

# Lambda functions: arm64 build for the stack, local runs under the Runtime
# Interface Emulator.
FUNCTIONS := relay enqueue
DIST := $(CURDIR)/dist
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
FN ?=
TAGS ?=
EVENT ?= events/enqueue.single.json,events/relay.notify.json

.PHONY: build
build: ## Build the Lambda functions for linux/arm64 into dist/relay.zip and dist/enqueue.zip (TAGS=spillway.noxray or spillway.nootel leaves a tracer out).
	@set -e; for fn in $(FUNCTIONS); do \
	  echo "== $$fn"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags 'lambda.norpc $(TAGS)' -trimpath -ldflags='-s -w' -o $(DIST)/$$fn/bootstrap ./functions/$$fn; \
	  $(GO) run ./scripts/zip -o $(DIST)/$$fn.zip $(DIST)/$$fn/bootstrap; \
	done

# The function binaries' tests run them under the emulator and fail without
# it: `make test` installs it first.
.PHONY: tools
tools: $(BIN)/aws-lambda-rie ## Install the tools the tests use into ./bin (aws-lambda-rie for the function binaries' tests; make test does it).

$(BIN)/aws-lambda-rie:
	GOBIN=$(BIN) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: invoke
invoke: $(BIN)/aws-lambda-rie ## Run a function locally under the emulator: EVENT=files (comma-separated), FN=relay|enqueue|consumer (default: from each file name).
	$(GO) run ./scripts/invoke -fn "$(FN)" -event "$(EVENT)" -rie $(BIN)/aws-lambda-rie

.PHONY: cli
cli: ## Build the CLI for this machine into bin/spillway, with its version. GOOS/GOARCH=... to cross-build.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X main.version=$(VERSION)' -o $(BIN)/spillway ./cmd/spillway

.PHONY: run
run: ## Run the whole system on the embedded default (in-process DynamoDB and Kafka): demo workload, summary. ARGS=... for flags.
	$(GO) run ./cmd/spillway run $(ARGS)

.PHONY: synth
synth: build infra/node_modules ## cdk synth without AWS credentials into cdk.out/ (placeholder MSK cluster and VPC; see infra/README.md).
	./infra/node_modules/.bin/cdk synth -q \
	  -c mskClusterArn=arn:aws:kafka:us-east-1:123456789012:cluster/demo/11111111-2222-3333-4444-555555555555-1 \
	  -c topics=orders -c vpcId=vpc-0123456789abcdef0 -c vpcCidr=10.0.0.0/16 -c subnetIds=subnet-0a,subnet-0b \
	  -c alarms=none

# Benchmarks: Go micro-benchmarks of the hot paths, then `spillway bench`
# (throughput and latency, in real time) on the embedded backends.
# docs/benchmarks.md records a run.
BENCHTIME ?= 300ms
BENCH_PKGS := ./outbox ./outbox/outboxddb ./outbox/outboxkafka
BENCH_ARGS ?=

.PHONY: bench
bench: ## Micro-benchmarks (hash, header codec, planner, item codec, publish; BENCHTIME each), then `spillway bench` (BENCH_ARGS=... for flags).
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=$(BENCHTIME) $(BENCH_PKGS)
	$(GO) run ./cmd/spillway bench $(BENCH_ARGS)

# The lab's simulated studies (internal/lab): each runs in a testing/synctest
# bubble, at its default seed, and its tables are compared with docs/lab/;
# `make lab` records them again (SCENARIO=name,... for some).
SCENARIO ?=

.PHONY: lab
lab: ## Run the simulated studies (cost, idle, steady, economy, scale) and rewrite their tables in docs/lab/ (SCENARIO=name,... for some).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run TestStudies ./internal/lab -update -scenario "$(SCENARIO)" -v

# Fleet simulation (internal/fleetsim): `make test` runs three seeds; a soak
# run picks one seed (random unless SEED is set) and writes for DURATION of
# simulated time at the same message rate.
SEED ?=
DURATION ?= 30m
ORDER_FAULTS ?=

.PHONY: soak
soak: ## Long fleet simulation: SEED=<n> (default random) DURATION=<simulated write time> (default 30m) ORDER_FAULTS=all|<names>.
	SPILLWAY_SOAK_SEED=$(SEED) SPILLWAY_SOAK_DURATION=$(DURATION) SPILLWAY_SOAK_ORDER_FAULTS=$(ORDER_FAULTS) $(GO) test -run TestFleetSoak -timeout 0 -v ./internal/fleetsim/
