// Package generic is the pure-Go backend: slow but correct ports of the C _ref kernels, for
// architectures without the C or assembly backends and as a third opinion in tests.
package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// set is filled by register_gen.go (generated from the op list: each kernel calls the Go
// port of the same name) and registered by zz_register.go.
var set = &kern.Set{Backend: "generic", Variant: cpu.Ref}

// f32 views n floats at p.
func f32(p kern.P, n int) []float32 { return unsafe.Slice((*float32)(p), n) }
