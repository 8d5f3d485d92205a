//go:build !cgo || !amd64

// Package omp is the OpenMP peer of the benchmark suite; this build has no cgo (or is not
// amd64), so the peer is unavailable and every call reports it.
package omp

import "errors"

var errUnavailable = errors.New("omp: OpenMP peer unavailable (built without cgo or not amd64)")

// Available reports whether the OpenMP peer is built into this binary.
func Available() bool { return false }

// Unavailable says why the peer is missing.
func Unavailable() string { return errUnavailable.Error() }

// SetThreads does nothing without the peer.
func SetThreads(n int) {}

// Warm does nothing without the peer.
func Warm(n int) {}

// Pin reports the peer missing.
func Pin(cpus []int) error { return errUnavailable }

// MaxThreads is 0 without the peer.
func MaxThreads() int { return 0 }

// Info says the peer is missing.
func Info() string { return Unavailable() }

// Variant numbers of the C kernels.
const (
	Ref    = 0
	AVX2   = 1
	AVX512 = 2
)

// ParseVariant reports the peer missing.
func ParseVariant(s string) (int, error) { return 0, errUnavailable }

// Gemv reports the peer missing.
func Gemv(q5 bool, variant int, y []float32, w, x []byte, rows, cols, chunk int) error {
	return errUnavailable
}
