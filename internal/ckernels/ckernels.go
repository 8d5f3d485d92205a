//go:build cgo && amd64 && !purego

// Package ckernels is the cgo backend: the C kernels of csrc/ called through cgo.
// It registers one kern.Set per variant (ref, avx2, avx512) under the name "cgo".
package ckernels

/*
#cgo CFLAGS: -O3 -std=c11 -I${SRCDIR}/../../csrc -Wall -Wno-unused-function
#include "kernelrt.h"
*/
import "C"

import (
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// sets[v] is filled by bindings_gen.go (generated from the op list) and registered by
// zz_register.go.
var sets = [3]*kern.Set{
	{Backend: "cgo", Variant: cpu.Ref},
	{Backend: "cgo", Variant: cpu.AVX2},
	{Backend: "cgo", Variant: cpu.AVX512},
}

// register runs last (zz_register.go sorts after every other file), once all fields are set.
func register() {
	for _, s := range sets {
		kern.Register(s)
	}
}
