//go:build amd64 && !noasm

package asm

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"runtime/trace"
	"sync"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// relTol is the agreement required between variants and backends for float outputs:
// |a-b| <= relTol*max(|a|,|b|) + absTol*max|reference| (the second term covers values that
// are small only because of cancellation in a sum).
const (
	relTol = 1e-5
	absTol = 1e-6
)

// others returns the sets every asm variant is compared with: the generic backend, and the
// cgo backend's same variant when cgo is built in (cgo_test.go links it).
func others(v cpu.Variant) []*kern.Set {
	var out []*kern.Set
	if s, err := kern.Lookup("generic", cpu.Ref); err == nil {
		out = append(out, s)
	}
	if s, err := kern.Lookup("cgo", v); err == nil {
		out = append(out, s)
	}
	return out
}

// compare reports how got differs from want; "" when they agree.
func compare(got, want output, exact bool) string {
	if len(got.b) != len(want.b) {
		return fmt.Sprintf("%s: %d bytes, want %d", got.name, len(got.b), len(want.b))
	}
	if bytes.Equal(got.b, want.b) {
		return ""
	}
	if exact || got.exact {
		for i := range got.b {
			if got.b[i] != want.b[i] {
				return fmt.Sprintf("%s: byte %d is %#02x, want %#02x (byte-identical output required)", got.name, i, got.b[i], want.b[i])
			}
		}
	}
	g := unsafe.Slice((*float32)(unsafe.Pointer(&got.b[0])), len(got.b)/4)
	w := unsafe.Slice((*float32)(unsafe.Pointer(&want.b[0])), len(want.b)/4)
	var scale float64
	for _, v := range w {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
	}
	for i := range g {
		a, b := float64(g[i]), float64(w[i])
		if math.Float32bits(g[i]) == math.Float32bits(w[i]) || math.IsNaN(a) && math.IsNaN(b) &&
			math.Float32bits(g[i]) != sentinel && math.Float32bits(w[i]) != sentinel {
			continue
		}
		if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) ||
			math.Abs(a-b) > relTol*math.Max(math.Abs(a), math.Abs(b))+absTol*scale {
			return fmt.Sprintf("%s[%d] = %g (%#08x), want %g (%#08x)", got.name, i, a, math.Float32bits(g[i]), b, math.Float32bits(w[i]))
		}
	}
	return ""
}

// TestKernels runs every op of every asm variant this CPU supports and compares it with the
// asm ref variant, the generic backend and (with cgo) the cgo backend's same variant.
func TestKernels(t *testing.T) {
	cases := allCases()
	for _, v := range cpu.Supported() {
		asmSet, err := kern.Lookup("asm", v)
		if err != nil {
			t.Fatal(err)
		}
		refs := others(v)
		if v != cpu.Ref {
			refs = append([]*kern.Set{sets[cpu.Ref]}, refs...)
		}
		for _, c := range cases {
			t.Run(c.name+"/"+v.String(), func(t *testing.T) {
				if !c.has(asmSet) {
					t.Skipf("asm has no %s (C kernel missing when asmgen ran)", c.field)
				}
				got := c.run(asmSet)
				again := c.run(asmSet)
				for i := range got {
					if !bytes.Equal(got[i].b, again[i].b) {
						t.Errorf("%s: two runs differ", got[i].name)
					}
				}
				compared := 0
				for _, ref := range refs {
					if !c.has(ref) || c.refOnly && v != cpu.Ref && ref.Backend != "cgo" {
						continue
					}
					want := c.run(ref)
					compared++
					identical := true
					for i := range got {
						if msg := compare(got[i], want[i], c.exact); msg != "" {
							t.Errorf("asm/%s vs %s: %s", v, ref.Name(), msg)
						}
						identical = identical && bytes.Equal(got[i].b, want[i].b)
					}
					if testing.Verbose() && identical {
						t.Logf("asm/%s == %s bit for bit", v, ref.Name())
					}
				}
				if compared == 0 {
					t.Logf("no other implementation of %s to compare with", c.field)
				}
			})
		}
	}
}

// TestComplete checks that asmgen found every kernel: the lead wants complete sets.
func TestComplete(t *testing.T) {
	if len(missing) > 0 {
		t.Errorf("asm backend lacks %v: the C kernels were placeholders when asmgen ran; run `make asm`", missing)
	}
	for _, s := range sets {
		rv := reflect.ValueOf(s).Elem()
		for i := 0; i < rv.NumField(); i++ {
			f := rv.Field(i)
			if f.Kind() == reflect.Func && f.IsNil() {
				t.Errorf("%s: %s is nil", s.Name(), rv.Type().Field(i).Name)
			}
		}
	}
	for _, v := range []cpu.Variant{cpu.Ref, cpu.AVX2, cpu.AVX512} {
		if s, err := kern.Lookup("asm", v); err != nil || s != sets[v] {
			t.Errorf("kern.Lookup(asm, %s) = %v, %v", v, s, err)
		}
	}
}

// TestNoAllocs: calling through a kern.Set field, including RMSNorm's closure that passes
// &eps, allocates nothing (the prototypes are go:noescape).
func TestNoAllocs(t *testing.T) {
	x := make([]float32, 896)
	w := make([]float32, 896)
	y := make([]float32, 896)
	for i := range x {
		x[i], w[i] = float32(i%7)-3, 1
	}
	for _, v := range cpu.Supported() {
		s := sets[v]
		eps := float32(1e-6)
		if n := testing.AllocsPerRun(100, func() { s.RMSNorm(p(y), p(x), p(w), eps, len(x), 0, 1) }); n != 0 {
			t.Errorf("%s RMSNorm: %v allocs per call", s.Name(), n)
		}
		if n := testing.AllocsPerRun(100, func() { s.Add(p(y), p(x), p(w), 0, len(x)) }); n != 0 {
			t.Errorf("%s Add: %v allocs per call", s.Name(), n)
		}
	}
}

// runAll calls every case of every supported variant once.
func runAll(cases []opCase) {
	for _, v := range cpu.Supported() {
		for _, c := range cases {
			if c.has(sets[v]) {
				c.run(sets[v])
				runtime.Gosched() // a trace event with a frame-pointer stack right after the call
			}
		}
	}
}

// TestUnderTrace runs every kernel while the execution tracer records, from several fresh
// goroutines. The tracer unwinds stacks through frame pointers, so a kernel that returned with
// BP clobbered (c2goasm problem 3) crashes here. `go test -trace=/tmp/x.trace ./asm/` runs
// the whole package under the tracer too.
func TestUnderTrace(t *testing.T) {
	if !trace.IsEnabled() {
		var buf bytes.Buffer
		if err := trace.Start(&buf); err != nil {
			t.Fatal(err)
		}
		defer trace.Stop()
	}
	cases := allCases()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runAll(cases)
		}()
	}
	runAll(cases)
	wg.Wait()
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

// TestStackMoves calls kernels from fresh goroutines at many stack depths: the generated
// functions' prologues grow the stack, which moves the caller's frame, including the eps that
// RMSNorm's closure passes by address, and GEMM's 36-44 KiB frames never fit a new stack.
func TestStackMoves(t *testing.T) {
	cases := allCases()
	var pick []opCase
	for _, c := range cases {
		if c.field == "RMSNorm" || c.name == "GemmQ8_0/small" || c.field == "Attention" {
			pick = append(pick, c)
		}
	}
	for _, v := range cpu.Supported() {
		for _, c := range pick {
			want := c.run(sets[v])
			for depth := 0; depth < 12; depth++ {
				done := make(chan []output)
				go grow(depth, func() { done <- c.run(sets[v]) })
				got := <-done
				for i := range got {
					if !bytes.Equal(got[i].b, want[i].b) {
						t.Errorf("%s/%s at depth %d: %s differs", c.name, v, depth, got[i].name)
					}
				}
			}
		}
	}
}
