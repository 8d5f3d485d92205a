//go:build cgo && amd64

// Package omp is the OpenMP peer of the benchmark suite: kernelrt's own C GEMV kernels (a
// private copy of csrc/gemv.c and csrc/quant.c compiled with -fopenmp) split over rows by
// `#pragma omp parallel for`, so the suite can compare the Go thread pool with an OpenMP
// runtime driving identical kernels. Without cgo the package reports itself unavailable.
//
// libgomp keeps one thread team per master thread: call Gemv from one goroutine locked to
// its OS thread (runtime.LockOSThread), or every new thread the goroutine lands on grows
// another team. Team threads inherit the master's CPU affinity when created: call Warm
// before pinning the master.
package omp

/*
#cgo CFLAGS: -O3 -std=gnu11 -fopenmp -I${SRCDIR}/../../csrc -Wall -Wno-unused-function
#cgo LDFLAGS: -fopenmp
#include "omp_peer.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// Available reports whether the OpenMP peer is built into this binary.
func Available() bool { return true }

// Unavailable says why the peer is missing ("" when available).
func Unavailable() string { return "" }

// SetThreads sets the OpenMP team size for later calls (omp_set_num_threads).
func SetThreads(n int) { C.kbomp_set_threads(C.int(n)) }

// Warm runs an empty parallel region of n threads, so that libgomp creates the calling
// thread's team now. Team threads inherit the creating thread's CPU affinity: warm the
// team before pinning the calling thread, or every team thread is pinned to its core too.
func Warm(n int) { C.kbomp_warm(C.int(n)) }

// Pin pins thread i of a len(cpus)-thread team to cpus[i], the calling (master) thread
// included, as the Go thread pool pins its workers. Team threads keep the pinning for later
// regions; the caller's own mask is the caller's to restore.
func Pin(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	c := make([]C.int, len(cpus))
	for i, v := range cpus {
		c[i] = C.int(v)
	}
	if n := C.kbomp_pin(&c[0], C.int(len(c))); n != 0 {
		return fmt.Errorf("omp.Pin(%v): sched_setaffinity failed on %d thread(s)", cpus, int(n))
	}
	return nil
}

// MaxThreads is omp_get_max_threads(): the team size the next parallel region gets.
func MaxThreads() int { return int(C.kbomp_max_threads()) }

// Info describes the OpenMP runtime and the environment settings that steer it.
func Info() string {
	return fmt.Sprintf("libgomp (gcc -fopenmp), omp_get_max_threads=%d, OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s, OMP_PROC_BIND=%s",
		MaxThreads(), env("OMP_WAIT_POLICY", "unset (libgomp default: spin a while, then sleep)"),
		env("GOMP_SPINCOUNT", "unset"), env("OMP_PROC_BIND", "unset"))
}

func env(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

// Variant numbers of the C kernels.
const (
	Ref    = 0
	AVX2   = 1
	AVX512 = 2
)

// ParseVariant maps "ref", "avx2", "avx512" to a variant number.
func ParseVariant(s string) (int, error) {
	switch s {
	case "ref":
		return Ref, nil
	case "avx2":
		return AVX2, nil
	case "avx512":
		return AVX512, nil
	}
	return 0, fmt.Errorf("omp: unknown variant %q", s)
}

// Gemv computes y = W x for rows x cols weights w (Q8_0 blocks of 34 bytes, or Q5_0 blocks
// of 22 bytes when q5) and Q8_0 activations x (cols/32 blocks), with the C kernel of the
// given variant over row chunks of chunk rows in an OpenMP parallel loop. The caller must
// have checked the sizes (rows*cols/32 blocks in w, cols/32 in x, rows floats in y) and that
// the CPU runs the variant; Gemv checks only that the slices are long enough.
func Gemv(q5 bool, variant int, y []float32, w, x []byte, rows, cols, chunk int) error {
	bb := 34
	if q5 {
		bb = 22
	}
	switch {
	case rows <= 0 || cols <= 0 || cols%32 != 0 || chunk <= 0:
		return fmt.Errorf("omp.Gemv: bad shape rows=%d cols=%d chunk=%d", rows, cols, chunk)
	case variant < Ref || variant > AVX512:
		return fmt.Errorf("omp.Gemv: bad variant %d", variant)
	case len(y) < rows || len(w) < rows*cols/32*bb || len(x) < cols/32*34:
		return fmt.Errorf("omp.Gemv: short buffers: y %d (want %d), w %d (want %d), x %d (want %d)",
			len(y), rows, len(w), rows*cols/32*bb, len(x), cols/32*34)
	}
	q := C.int(0)
	if q5 {
		q = 1
	}
	C.kbomp_gemv(q, C.int(variant), (*C.float)(unsafe.Pointer(&y[0])), unsafe.Pointer(&w[0]), unsafe.Pointer(&x[0]),
		C.int64_t(rows), C.int64_t(cols), C.int64_t(chunk))
	return nil
}
