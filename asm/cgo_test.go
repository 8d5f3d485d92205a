//go:build cgo && amd64 && !purego

package asm

// With cgo, the tests and benchmarks also compare with and race against the cgo backend
// (the same C compiled by the system C compiler and called through cgo).
import _ "github.com/kernelrt/kernelrt/internal/ckernels"
