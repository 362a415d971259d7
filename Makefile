# zaris-go build targets. `make help` lists them.

GO        ?= go
THRIFT    ?= thrift
# GEN is where the client's generated code goes (from idl/), TOOLS_GEN the store's protocol (from
# tools/idl/); tests regenerate into temporary ones to prove both are fresh.
GEN       ?= gen
TOOLS_GEN ?= tools/gen
THRIFT_VERSION := 0.17.0
# mockgen runs in a module of its own in a temporary directory: never in the workspace.
MOCKGEN   := GOWORK=off $(GO) run github.com/golang/mock/mockgen@v1.6.0
MODULE    := github.com/clustron/zaris-go
IDL       := $(wildcard idl/*.thrift)
TOOLS_IDL := $(wildcard tools/idl/*.thrift)
# The client (gen, runtime, middleware) is the root module; tools/ is its own module, so the
# store's dependencies never enter the client's build. Targets that cover code run over both.
# tools/go.mod requires a released version of the client, so that both modules release by tag;
# the workspace (go.work: both modules, and that version replaced by this checkout) makes the
# tools module's commands build against this checkout's client. The client's own commands
# (ROOTGO) leave the workspace out: the client is built, tested and linted against its own
# go.mod, as a user gets it, not against the versions the workspace selects for both.
TOOLS     := tools
ROOTGO    := GOWORK=off $(GO)

.PHONY: help generate check-generate check-thrift test test-modes lint bench bench-go demo fuzz soak mutate

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

check-thrift:
	@command -v $(THRIFT) >/dev/null 2>&1 || { echo "thrift not found: install the Thrift compiler $(THRIFT_VERSION) (apt-get install thrift-compiler)"; exit 1; }
	@$(THRIFT) --version | grep -q ' $(THRIFT_VERSION)$$' || { echo "thrift is $$($(THRIFT) --version), want $(THRIFT_VERSION) (apt-get install thrift-compiler on Debian 12)"; exit 1; }

generate: check-thrift ## regenerate gen/ from idl/ (thrift, then zarisgen, then mockgen) and tools/gen/ from tools/idl/ (thrift); nothing changes unless every step succeeds; go generate ./gen/... runs it too
	@set -e; new=$$(mktemp -d); trap 'rm -rf "$$new"' EXIT; \
	mkdir -p $$new/gen $$new/tools; \
	for f in $(IDL); do \
		$(THRIFT) --gen go:package_prefix=$(MODULE)/gen/,skip_remote -out $$new/gen $$f; \
	done; \
	for f in $(TOOLS_IDL); do \
		$(THRIFT) --gen go:package_prefix=$(MODULE)/tools/gen/,skip_remote -out $$new/tools $$f; \
	done; \
	gofmt -w $$new; \
	$(GO) -C $(TOOLS) build -o $$new/.bin/zarisgen ./zarisgen; \
	$$new/.bin/zarisgen -thrift $(THRIFT) -idl idl/zaris.thrift -out $$new/gen/zarisclient -server-out $$new/gen/zarisserver -codec-out $$new/gen/zariscodec \
		-go-generate 'make -C ../.. generate'; \
	rm -rf $$new/.bin; \
	printf 'module $(MODULE)/gen\n' > $$new/gen/go.mod; \
	(cd $$new/gen && $(MOCKGEN) -source=zaris/zaris.go -destination=zarismock/zaris_mock.go -package=zarismock); \
	(cd $$new/gen && $(MOCKGEN) -source=zarisclient/zarisclient.go -destination=zarisclientmock/zarisclient_mock.go -package=zarisclientmock); \
	rm $$new/gen/go.mod; \
	mkdir -p $(GEN) $(TOOLS_GEN); \
	for d in $$new/gen/*/; do \
		pkg=$$(basename $$d); rm -rf $(GEN)/$$pkg; cp -R $$d $(GEN)/$$pkg; \
	done; \
	for d in $$new/tools/*/; do \
		[ -d "$$d" ] || continue; pkg=$$(basename $$d); rm -rf $(TOOLS_GEN)/$$pkg; cp -R $$d $(TOOLS_GEN)/$$pkg; \
	done

check-generate: generate ## regenerate and fail if gen/ or tools/gen/ differs from what is committed
	@git diff --exit-code --stat -- gen tools/gen || { echo "generated code is stale: run make generate and commit the result"; exit 1; }
	@test -z "$$(git status --porcelain -- gen tools/gen)" || { git status --porcelain -- gen tools/gen; echo "gen/ or tools/gen/ has files git does not track: run make generate and commit the result"; exit 1; }

test: lint ## lint, run every test (the fuzz targets' seeds among them) with the race detector (and the allocation counts without it), then the churn tests in each connection mode
	$(ROOTGO) test -race -count=1 -timeout 10m ./...
	$(ROOTGO) test -count=1 -run 'Alloc' ./...
	$(GO) -C $(TOOLS) test -race -count=1 -timeout 10m ./...
	$(MAKE) test-modes

# CHURN_TESTS are the proof churn test and the short demo, packages of the tools module.
CHURN_TESTS := -run 'TestLinearizable_AllChurnInOneRun|TestShortRun' ./proof ./zaris/demo

test-modes: ## the proof churn test and the short demo with pipelined connections and with the pool alone (ZARIS_PIPELINE)
	ZARIS_PIPELINE=true $(GO) -C $(TOOLS) test -race -count=1 -timeout 5m $(CHURN_TESTS)
	ZARIS_PIPELINE=false $(GO) -C $(TOOLS) test -race -count=1 -timeout 5m $(CHURN_TESTS)

# STATICCHECK is staticcheck, pinned, built into bin/ once. The tools module is vetted and
# checked with -race, so that its dependencies (etcd, gRPC) are compiled once, in the flavour
# its race tests link, not once more without it.
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(CURDIR)/bin/staticcheck-$(STATICCHECK_VERSION)/staticcheck

$(STATICCHECK):
	GOBIN=$(dir $(STATICCHECK)) $(ROOTGO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK) ## gofmt check, go vet, and staticcheck (pinned; not on the generated gen/ and tools/gen/)
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt would change:"; echo "$$out"; exit 1; }
	$(ROOTGO) vet ./...
	GOFLAGS="$$GOFLAGS -race" $(GO) -C $(TOOLS) vet ./...
	GOWORK=off $(STATICCHECK) $$($(ROOTGO) list ./... | grep -v '/gen/')
	cd $(TOOLS) && GOFLAGS="$$GOFLAGS -race" $(STATICCHECK) $$($(GO) list ./... | grep -v '/tools/gen/')

demo: ## run the churn demo on an embedded cluster; writes demo-out/report.json, timeline.html and (with chromium) timeline.png
	$(GO) -C $(TOOLS) run ./zaris demo --out $(CURDIR)/demo-out

bench: ## measure overhead, protocols, scale, churn and the refresh storm; prints a table, writes bench-out/bench.json
	$(GO) -C $(TOOLS) run ./zarisbench -out $(CURDIR)/bench-out

bench-go: ## run the go test benchmarks
	$(ROOTGO) test -run '^$$' -bench . -benchmem ./...
	$(GO) -C $(TOOLS) test -run '^$$' -bench . -benchmem ./...

# FUZZ_TARGETS are the fuzz targets of the client and zarisgen, as package:Function (a package
# under tools/ is run in the tools module). `make fuzz` runs each for FUZZTIME, `make soak` for
# SOAK_FUZZTIME with STORE_FUZZ_TARGETS, the reference store's. `make test` runs only their
# seeds, as every test, with -race: a fuzz build instruments every package it links, so even
# 3 s of each target cost a build from empty caches more than a minute and a half (the
# store's, which link etcd's server, more again), and fuzzing is a soak's work.
FUZZ_TARGETS := runtime:FuzzNewConfigEnv runtime:FuzzMalformedReply runtime:FuzzReplyNames internal/thriftbuf:FuzzMemFrames internal/codeccheck:FuzzCodec \
	tools/zarisgen:FuzzParseProgram tools/zarisgen:FuzzIDLNames
STORE_FUZZ_TARGETS := tools/store:FuzzNodeHeaderPort tools/store:FuzzNodeJSONPort tools/store:FuzzMemMultiGet tools/store:FuzzCodecGet \
	tools/store:FuzzCodecGetCompact
FUZZTIME      ?= 3s
SOAK_FUZZTIME ?= 60s
# CODEC_FUZZ is the generated codec's fuzz target, which `make soak` runs for CODEC_SOAK_FUZZTIME
# more: the codec carries every pipelined call, so it gets the longest look.
CODEC_FUZZ          := internal/codeccheck:FuzzCodec
CODEC_SOAK_FUZZTIME ?= 10m
SOAK_COUNT    ?= 20

# Go 1.26's fuzz coordinator can fail a target at the end of -fuzztime with a bare "context
# deadline exceeded" and no input (go.dev/issue/75804, fixed in Go 1.27). `make fuzz` runs such
# a target again, at most twice; a real failure writes its input to testdata, which fails the
# next run too.
fuzz: ## run each of FUZZ_TARGETS for FUZZTIME (3s) beyond its committed seeds
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; dir=.; work=off; \
		case $$pkg in $(TOOLS)/*) dir=$(TOOLS); work=; pkg=$${pkg#$(TOOLS)/};; esac; \
		for try in 1 2 3; do \
			echo "fuzz $$fn ./$$pkg in $$dir for $(FUZZTIME)"; \
			out=$$(GOWORK=$$work $(GO) -C $$dir test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg 2>&1); rc=$$?; \
			echo "$$out" | grep -v '^fuzz: elapsed'; \
			[ $$rc -eq 0 ] && break; \
			echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written to' || exit 1; \
			[ $$try -lt 3 ] || exit 1; \
			echo "fuzz $$fn: the fuzz coordinator's deadline race (go.dev/issue/75804), no input found; again"; \
		done; \
	done

# STORE_FAULT_TESTS are the store's own fault tests (fenced cut-over, tombstones) that `make
# soak` repeats with the proof tests; `make test` runs them once with everything else.
STORE_FAULT_TESTS := ^(TestCutover_|TestTombstone_|TestSegment_AppliesOnlyNewerEntries|TestCoordinator_Revoke)

soak: ## long run: each fuzz target (the store's too) for SOAK_FUZZTIME (60s) and the codec's for CODEC_SOAK_FUZZTIME (10m) more, the proof tests and the store's fault tests SOAK_COUNT (20) times with -race, then make mutate
	$(MAKE) fuzz FUZZ_TARGETS="$(FUZZ_TARGETS) $(STORE_FUZZ_TARGETS)" FUZZTIME=$(SOAK_FUZZTIME)
	$(MAKE) fuzz FUZZ_TARGETS=$(CODEC_FUZZ) FUZZTIME=$(CODEC_SOAK_FUZZTIME)
	$(GO) -C $(TOOLS) test -race -count=$(SOAK_COUNT) -timeout 60m ./proof
	$(GO) -C $(TOOLS) test -race -count=$(SOAK_COUNT) -timeout 30m -run '$(STORE_FAULT_TESTS)' ./store
	$(MAKE) mutate

# Mutation testing with gremlins (pinned), one tree of MUTATE_DIRS at a time, MUTATE_WORKERS
# mutants at a time (one by default; it is slow: see tools/proof/README.md): each mutant's package tests run with a timeout
# of MUTATE_TIMEOUT_COEFFICIENT times the tree's plain test run. GOFLAGS: -count=1 so that the
# timing run is a real one, not a cached result; -trimpath so that the builds in gremlins' copy
# of the module reuse the build cache (a build's cache key otherwise holds its directory).
# tools/mutate runs the mutants gremlins cannot see (in a case's condition, after a function
# literal in its statement, or in a declaration: Go's coverage has no block there), scores
# the logs against
# tools/mutate/equivalent.txt, the mutants no test can tell from the code, and fails below
# MUTATE_MIN percent.
GREMLINS   := $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@v0.5.0
MUTATE_DIRS ?= middleware runtime
MUTATE_OUT  ?= mutate-out
MUTATE_TIMEOUT_COEFFICIENT ?= 3
MUTATE_MIN  ?= 90
MUTATE_WORKERS ?= 1

mutate: ## mutation testing of MUTATE_DIRS (runtime/, middleware/) with gremlins v0.5.0: the score and every surviving mutant by file:line
	@mkdir -p $(MUTATE_OUT)
	@for d in $(MUTATE_DIRS); do \
		echo "mutate ./$$d (log: $(MUTATE_OUT)/$$d.log)"; start=$$(date +%s); \
		GOWORK=off GOFLAGS='-count=1 -trimpath' nice -n 15 $(GREMLINS) unleash --workers $(MUTATE_WORKERS) \
			--timeout-coefficient $(MUTATE_TIMEOUT_COEFFICIENT) ./$$d > $(MUTATE_OUT)/$$d.log 2>&1 \
			|| { tail -20 $(MUTATE_OUT)/$$d.log; exit 1; }; \
		echo "mutate ./$$d: $$(( $$(date +%s) - start )) s"; \
	done
	GOFLAGS=-trimpath nice -n 15 $(GO) -C $(TOOLS) run ./mutate -equivalent mutate/equivalent.txt -min $(MUTATE_MIN) \
		-module $(CURDIR) -workers $(MUTATE_WORKERS) -timeout-coefficient $(MUTATE_TIMEOUT_COEFFICIENT) \
		$(foreach d,$(MUTATE_DIRS),$(d)=$(abspath $(MUTATE_OUT))/$(d).log)
