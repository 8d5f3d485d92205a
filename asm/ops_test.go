//go:build amd64 && !purego

package asm_test

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/trace"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/parity"
)

// The op tests run parity's cases (one list of ops, with inputs and float64 references) on
// the asm backend's kernels, through a one-thread Runtime forced to asm/<variant>: every op
// the op list has is covered without a case written here.

// runtimeFor returns a one-thread Runtime whose every call runs backend/variant's kernels.
func runtimeFor(t testing.TB, backend string, v cpu.Variant) *kernelrt.Runtime {
	t.Helper()
	rt, err := kernelrt.New(kernelrt.Options{Threads: 1, NoPin: true, Backend: backend, Variant: v.String(), Thresholds: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// smallCases are the quick parity cases cheap enough to run many times.
func smallCases() []*parity.Case {
	var out []*parity.Case
	for _, c := range parity.Cases(true) {
		if !c.Full && !c.Heavy && c.Cost <= 1<<22 {
			out = append(out, c)
		}
	}
	return out
}

// TestKernels runs every small case on every asm variant: within the case's tolerance of the
// float64 reference, and the same bits when run twice.
func TestKernels(t *testing.T) {
	for _, v := range cpu.Supported() {
		rt := runtimeFor(t, "asm", v)
		for _, c := range smallCases() {
			t.Run(fmt.Sprintf("%s/%s %s", v, c.Fn, c.Shape), func(t *testing.T) {
				c.Prepare()
				defer c.Release()
				if err := c.Call(rt); err != nil {
					t.Fatal(err)
				}
				first := append([]byte(nil), c.Output()...)
				if rel, note := c.Check(); !(rel <= c.Tol) {
					t.Errorf("error vs float64 reference %g > %g %s", rel, c.Tol, note)
				}
				if err := c.Call(rt); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(first, c.Output()) {
					t.Errorf("two runs differ")
				}
			})
		}
	}
}

// TestUnderTrace runs every small case on every variant while the execution tracer records,
// from several goroutines. The tracer unwinds stacks through frame pointers, so a kernel that
// returned with BP clobbered (c2goasm problem 3) crashes here. `go test -trace=/tmp/x.trace
// ./asm/` runs the whole package under the tracer too.
func TestUnderTrace(t *testing.T) {
	if !trace.IsEnabled() {
		var buf bytes.Buffer
		if err := trace.Start(&buf); err != nil {
			t.Fatal(err)
		}
		defer trace.Stop()
	}
	run := func() error {
		for _, v := range cpu.Supported() {
			rt, err := kernelrt.New(kernelrt.Options{Threads: 1, NoPin: true, Backend: "asm", Variant: v.String(), Thresholds: "default"})
			if err != nil {
				return err
			}
			for _, c := range smallCases() {
				if !c.Calib {
					continue
				}
				c.Prepare()
				err := c.Call(rt)
				c.Release()
				runtime.Gosched() // a trace event with a frame-pointer stack right after the call
				if err != nil {
					rt.Close()
					return err
				}
			}
			rt.Close()
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- run() }()
	}
	errs <- run()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	runtime.GC()
}

// grow uses about depth KiB of stack and then calls f, so that f's callee starts close to
// the end of the goroutine's stack and its prologue has to grow (move) the stack.
//
//go:noinline
func grow(depth int, f func()) {
	var pad [1024]byte
	if depth > 0 {
		grow(depth-1, f)
	} else {
		f()
	}
	runtime.KeepAlive(pad)
}

// TestStackMoves calls one case of every op from fresh goroutines at many stack depths: the
// generated functions' prologues grow the stack, which moves the caller's frame, including a
// float scalar a thunk passes by address (RMSNorm's eps), and the GEMMs' 46-100 KiB frames
// never fit a new stack. Every depth must give the same bits. Each op runs its smallest
// non-Full case, so ops whose representative case is large (the GEMMs) are covered too.
func TestStackMoves(t *testing.T) {
	for _, v := range cpu.Supported() {
		rt := runtimeFor(t, "asm", v)
		for _, c := range parity.Smallest(parity.Cases(true)) {
			c.Prepare()
			if err := c.Call(rt); err != nil {
				t.Fatal(err)
			}
			want := append([]byte(nil), c.Output()...)
			for depth := 0; depth < 12; depth += 3 {
				done := make(chan []byte)
				go grow(depth, func() {
					if err := c.Call(rt); err != nil {
						t.Error(err)
					}
					done <- append([]byte(nil), c.Output()...)
				})
				if got := <-done; !bytes.Equal(got, want) {
					t.Errorf("%s/%s %s at depth %d: output differs", v, c.Fn, c.Shape, depth)
				}
			}
			c.Release()
		}
	}
}

// BenchmarkOps times every op's representative decode-size call per backend and variant:
//
//	go test -run '^$' -bench 'Ops/.*/(asm|cgo)-avx512' -benchtime 200ms ./asm/
func BenchmarkOps(b *testing.B) {
	for _, c := range parity.Cases(true) {
		if !c.Calib {
			continue
		}
		c.Prepare()
		b.Run(c.Fn+"/"+c.Shape, func(b *testing.B) {
			for _, backend := range kernelrt.Backends() {
				for _, v := range cpu.Supported() {
					if backend == "generic" && v != cpu.Ref {
						continue
					}
					b.Run(backend+"-"+v.String(), func(b *testing.B) {
						rt := runtimeFor(b, backend, v)
						for i := 0; i < b.N; i++ {
							if err := c.Call(rt); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		})
		c.Release()
	}
}
