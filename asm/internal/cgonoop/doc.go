// Package cgonoop holds trivial C functions called through cgo, for package asm's per-call
// overhead benchmarks (cgo is not allowed in _test.go files). Without cgo it is empty.
package cgonoop
