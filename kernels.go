// Package kernelrt runs the hot path of CPU LLM inference from Go: SIMD kernels for
// ggml-compatible quantized GEMV and the other decoder ops, a pinned thread pool
// (threadpool/), a GC-free arena (arena/) and a dispatch table that decides per op whether
// and how to split work across the pool.
//
// The functions in this file are the serial kernels. Each checks every argument before any
// C or assembly runs and returns an error naming the argument and the numbers; none panics
// on bad input.
package kernelrt

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// QK is the number of weights in one quantized block (Q8_0 and Q5_0).
const QK = 32

// BlockQ8_0 is byte-identical to ggml's block_q8_0: value[j] = fp16(D) * Qs[j]. 34 bytes.
type BlockQ8_0 struct {
	D  uint16
	Qs [32]int8
}

// BlockQ5_0 is byte-identical to ggml's block_q5_0: value[j] = fp16(D) * (q[j] - 16), where
// q[j] = low nibble (Qs[j] for j < 16, Qs[j-16]>>4 otherwise) | bit j of Qh << 4. 22 bytes.
type BlockQ5_0 struct {
	D  uint16
	Qh [4]uint8
	Qs [16]uint8
}

// active is the kernel set every serial function and dispatch wrapper calls.
var active atomic.Pointer[kern.Set]

// defaultBackend is the backend chosen when neither KERNELRT_BACKEND nor an option says.
// Preference order: cgo (C compiled by the system compiler), then generic.
func defaultBackend() string {
	have := kern.Backends()
	for _, b := range []string{"cgo", "asm", "generic"} {
		for _, h := range have {
			if h == b {
				return b
			}
		}
	}
	return "generic"
}

func init() {
	backend := os.Getenv("KERNELRT_BACKEND")
	if backend == "" {
		backend = defaultBackend()
	}
	v := cpu.Best()
	if s := os.Getenv("KERNELRT_VARIANT"); s != "" {
		pv, err := cpu.ParseVariant(s)
		if err != nil {
			panic(fmt.Sprintf("kernelrt: KERNELRT_VARIANT: %v", err))
		}
		v = pv
	}
	if err := selectKernels(backend, v); err != nil {
		panic(fmt.Sprintf("kernelrt: KERNELRT_BACKEND=%q KERNELRT_VARIANT=%q: %v", backend, v, err))
	}
}

func selectKernels(backend string, v cpu.Variant) error {
	if !cpu.Supports(v) {
		return fmt.Errorf("this CPU cannot run the %s variant", v)
	}
	if backend == "generic" {
		v = cpu.Ref // the pure-Go backend has one variant
	}
	s, err := kern.Lookup(backend, v)
	if err != nil {
		return err
	}
	active.Store(s)
	return nil
}

// Backends lists the kernel backends built into this binary ("asm", "cgo", "generic").
func Backends() []string { return kern.Backends() }

// Variants lists the kernel variants this CPU can run, slowest first ("ref", "avx2", "avx512").
func Variants() []string {
	var out []string
	for _, v := range cpu.Supported() {
		out = append(out, v.String())
	}
	return out
}

// Kernels reports the kernel set in use as "backend/variant", e.g. "cgo/avx512".
func Kernels() string { return active.Load().Name() }

// UseKernels switches every kernel to the given backend and variant (as listed by Backends and
// Variants) and returns a function that restores the previous choice. It is meant for tests
// and benchmarks; it must not race with running kernels.
func UseKernels(backend, variant string) (restore func(), err error) {
	v, err := cpu.ParseVariant(variant)
	if err != nil {
		return func() {}, err
	}
	prev := active.Load()
	if err := selectKernels(backend, v); err != nil {
		return func() {}, fmt.Errorf("kernelrt.UseKernels(%q, %q): %w", backend, variant, err)
	}
	return func() { active.Store(prev) }, nil
}

// ks returns the kernel set in use.
func ks() *kern.Set { return active.Load() }
