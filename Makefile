# kernelrt: `make bench` runs the main job, `make test` runs the tests.
GO        ?= go
BUILD     ?= build
GOTESTFLAGS ?=

.PHONY: all test test-go test-nocgo test-race test-c vet fmt-check bench parity parity-quick calibrate asm asm-check clean

all: test

## test: everything CI runs: vet, gofmt, Go tests with and without cgo, race, fuzz seeds, C tests, parity-quick
test: fmt-check vet test-go test-nocgo test-race test-c parity-quick

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test-go:
	$(GO) test $(GOTESTFLAGS) -count=1 ./...

test-nocgo:
	CGO_ENABLED=0 $(GO) test $(GOTESTFLAGS) -count=1 ./...

test-race:
	$(GO) test -race -count=1 -short ./threadpool/ ./arena/

## test-c: build csrc as a static C library with CMake and run its tests with ctest
test-c:
	cmake -S . -B $(BUILD)/c -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)/c -j2
	cd $(BUILD)/c && ctest --output-on-failure

parity:
	$(GO) run ./parity

parity-quick:
	$(GO) run ./parity -quick

bench:
	$(GO) run ./bench $(BENCHFLAGS)

calibrate:
	$(GO) run ./cmd/calibrate

clean:
	rm -rf $(BUILD)
