# kernelrt: `make bench` runs the main job, `make test` runs the tests.
GO          ?= go
BUILD       ?= build
BENCHFLAGS  ?=
MODEL       ?=

.PHONY: all help test generate generate-check fmt-check vet test-go test-nocgo test-tags test-race \
	test-trace test-c bench loadtest soak openai-node parity parity-quick calibrate clean

all: test

## help: list the targets with what each does.
help:
	@awk '/^## [a-z-]+:/ { sub(/^## /, ""); print "  " $$0 }' $(MAKEFILE_LIST)

## test: what CI runs: generated code up to date, gofmt, vet, Go tests with cgo (all
## backends) and without (asm + generic), the build tags (purego, noasm), the race detector
## on the concurrent packages, a run under the execution tracer (a clobbered frame pointer
## in generated assembly crashes it), the C library's own tests through CMake/ctest, and the
## quick parity table. Fuzz seed corpora run with the Go tests.
test: generate-check fmt-check vet test-go test-nocgo test-tags test-race test-trace test-c parity-quick

## generate: regenerate the per-op plumbing from the op list (ops.manifest + csrc/kernelrt.h:
## tools/opgen) and the csrc/ hash the cgo backend carries. `make asm` regenerates asm/.
generate:
	$(GO) generate ./...

## generate-check: fail when `go generate ./...` would change a file (run on a copy of the
## working tree, so uncommitted edits count as they are).
generate-check:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$$tmp" 2>/dev/null; \
	(cd "$$tmp" && $(GO) generate ./...) || exit 1; \
	status=0; for f in $$(cd "$$tmp" && git -C "$(CURDIR)" ls-files -co --exclude-standard); do \
		if ! cmp -s "$$f" "$$tmp/$$f"; then echo "generate-check: $$f is stale: run make generate"; status=1; fi; \
	done; \
	for f in $$(cd "$$tmp" && find . -name '*_gen.go' | sed 's|^\./||'); do \
		[ -e "$$f" ] || { echo "generate-check: $$f is generated but not in the tree: run make generate"; status=1; }; \
	done; exit $$status

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./...

test-go:
	$(GO) test -count=1 ./...

test-nocgo:
	CGO_ENABLED=0 $(GO) test -count=1 ./...

## test-tags: -tags purego links only the pure-Go kernels (every package's tests run on them);
## -tags noasm (klauspost/cpuid's tag, which hides the CPU's features) is refused loudly.
test-tags:
	$(GO) test -count=1 -tags purego . ./orchestrator ./parity
	$(GO) test -count=1 -tags noasm -run 'TestNoasm|TestBuildTags' .

test-race:
	$(GO) test -race -short -count=1 ./threadpool/ ./arena/ ./orchestrator/ ./serve/ .

test-trace:
	mkdir -p $(BUILD)
	$(GO) test -count=1 -run 'Test' -trace=$(BUILD)/asm.trace ./asm/ >/dev/null

## test-c: build csrc as a static C library with CMake and run its tests with ctest
test-c:
	cmake -S . -B $(BUILD)/c -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)/c -j2
	cd $(BUILD)/c && ctest --output-on-failure

parity:
	$(GO) run ./cmd/parity

parity-quick:
	$(GO) run ./cmd/parity -quick

## bench: the main job: Qwen2-0.5B-shaped kernels, dispatch and whole-model numbers.
## make bench MODEL=file.gguf benchmarks a GGUF model instead.
bench:
ifeq ($(MODEL),)
	$(GO) run ./bench $(BENCHFLAGS)
else
	$(GO) run ./cmd/kernelrt bench -model $(MODEL) $(BENCHFLAGS)
endif

## loadtest: kernelrt serve under 256 concurrent streamed clients plus abuse (drops, 413, slow-loris), Qwen2-0.5B-shaped Q8_0; fails on a lost request or a leak.
loadtest:
	$(GO) run ./tools/loadtest -mode load -shape qwen2-0.5b -recipe q8_0 -clients 256 $(LOADTESTFLAGS)

## soak: kernelrt serve under 64 looping clients for 10 minutes; fails if RSS grows over 25% or the server does not return to idle.
soak:
	$(GO) run ./tools/loadtest -mode soak -duration 10m $(LOADTESTFLAGS)

## openai-node: the npm openai package as a second client of kernelrt serve (structured output, tools, logprobs, embeddings) on a random-weight model; needs node and npm, about 10 s.
openai-node:
	GO="$(GO)" tools/openai-node/run.sh

calibrate:
	$(GO) run ./cmd/calibrate

clean:
	rm -rf $(BUILD)

include asm.mk
include cross.mk
