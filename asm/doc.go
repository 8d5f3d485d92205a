// Package asm is the "asm" kernel backend: the C kernels of csrc/ compiled by clang and
// translated to Go assembly by c2goasm (tools/asmgen), so they run without cgo and are called
// like any Go assembly function (a few ns per call instead of a cgo transition).
//
// Importing the package registers one kern.Set per variant (ref, avx2, avx512) under the
// backend name "asm". The code exists for amd64 only; on other architectures, or with the
// purego build tag, the package is empty and registers nothing.
//
// Everything in *_amd64.s, the *_amd64.go prototype files and register_amd64.go is generated:
// edit csrc/ or tools/asmgen and run `make asm`; `make asm-check` fails when the committed
// files differ from a fresh generation.
//
// Tests (they compare every op of every variant with the generic backend and, with cgo, with
// the cgo backend; they also pass with CGO_ENABLED=0):
//
//	go test ./asm/
//	go test -trace=/tmp/x.trace ./asm/       # the whole suite under the execution tracer
//	go test -race ./asm/                     # checkptr too
//	go test -run '^$' -bench 'Call|Ops' ./asm/
//	KRT_ASM_VS_CGO=1 go test -run 'TestCallOverhead|TestVsCgo' -v ./asm/   # noise-resistant
package asm
