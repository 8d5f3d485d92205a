# kernelrt: `make bench` runs the main job, `make test` runs the tests.
GO          ?= go
BUILD       ?= build
BENCHFLAGS  ?=
MODEL       ?=

.PHONY: all test generate fmt-check vet test-go test-nocgo test-race test-trace test-c \
	bench parity parity-quick calibrate clean

all: test

## test: what CI runs: gofmt, vet, Go tests with cgo (all backends) and without (asm +
## generic), the race detector on the concurrent packages, a run under the execution tracer
## (a clobbered frame pointer in generated assembly crashes it), the C library's own tests
## through CMake/ctest, and the quick parity table. Fuzz seed corpora run with the Go tests.
test: generate fmt-check vet test-go test-nocgo test-race test-trace test-c parity-quick

## generate: refresh the csrc/ hash the cgo backend carries (the go command does not see
## edits to C files #included from outside a package directory).
generate:
	$(GO) generate ./internal/ckernels

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

test-race:
	$(GO) test -race -short -count=1 ./threadpool/ ./arena/ ./orchestrator/ .

test-trace:
	mkdir -p $(BUILD)
	$(GO) test -count=1 -run 'Test' -trace=$(BUILD)/asm.trace ./asm/ >/dev/null

## test-c: build csrc as a static C library with CMake and run its tests with ctest
test-c:
	cmake -S . -B $(BUILD)/c -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)/c -j2
	cd $(BUILD)/c && ctest --output-on-failure

parity:
	$(GO) run ./parity

parity-quick:
	$(GO) run ./parity -quick

## bench: the main job: Qwen2-0.5B-shaped kernels, dispatch and whole-model numbers.
## make bench MODEL=file.gguf benchmarks a GGUF model instead.
bench:
ifeq ($(MODEL),)
	$(GO) run ./bench $(BENCHFLAGS)
else
	$(GO) run ./cmd/kernelrt bench -model $(MODEL) $(BENCHFLAGS)
endif

calibrate:
	$(GO) run ./cmd/calibrate

clean:
	rm -rf $(BUILD)

include asm.mk
include cross.mk
