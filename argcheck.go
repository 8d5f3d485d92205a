package kernelrt

import (
	"unsafe"
)

// Shared helpers for the argument checks of every kernel file (kernels.go, kernels_gemm.go,
// kernels_ops.go) and the Runtime's dispatch wrappers.

// sliceP is the base pointer of s as the kern.Set functions take it; nil for a nil slice
// (an optional argument such as a GEMV bias).
func sliceP[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

// span is the byte range [lo, hi) that a slice's elements occupy.
type span struct{ lo, hi uintptr }

// spanOf returns the bytes s[0:len(s)] occupy. An empty slice has an empty span.
func spanOf[T any](s []T) span {
	var z T
	lo := uintptr(sliceP(s))
	return span{lo, lo + uintptr(len(s))*unsafe.Sizeof(z)}
}

// overlaps reports whether two slices share at least one byte (empty slices share none).
func overlaps(a, b span) bool { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi }

// checkNoOverlap refuses an output that shares memory with an input the kernel still reads
// after writing the output (a partial overlap would silently corrupt results).
func checkNoOverlap(fn, out, in string, a, b span) error {
	if overlaps(a, b) {
		return argErr(fn, out, "overlaps %s in memory; the kernel cannot work in place on it", in)
	}
	return nil
}

// checkLenF refuses a nil slice or one whose length is not exactly want, naming the formula
// that gave want: "w has length 100, want rows*cols/32 = 896 blocks".
func checkLenF[T any](fn, arg string, s []T, formula string, want int, unit string) error {
	if s == nil {
		return argErr(fn, arg, "is nil, want %s = %d %s", formula, want, unit)
	}
	if len(s) != want {
		return argErr(fn, arg, "has length %d, want %s = %d %s", len(s), formula, want, unit)
	}
	return nil
}

// checkOptLenF is checkLenF for an optional argument: nil is accepted.
func checkOptLenF[T any](fn, arg string, s []T, formula string, want int, unit string) error {
	if s == nil {
		return nil
	}
	return checkLenF(fn, arg, s, formula, want, unit)
}

// checkMinLenF refuses a nil slice or one shorter than want (a caller-owned scratch buffer may
// be larger than this call needs, so it can be reused across shapes).
func checkMinLenF[T any](fn, arg string, s []T, formula string, want int, unit string) error {
	if s == nil {
		return argErr(fn, arg, "is nil, want at least %s = %d %s", formula, want, unit)
	}
	if len(s) < want {
		return argErr(fn, arg, "has length %d, want at least %s = %d %s", len(s), formula, want, unit)
	}
	return nil
}

// checkMatrix checks rows > 0, cols a positive multiple of the block size qk (32 or 256) and
// rows*cols fitting an int, and returns rows*cols: the shape checks of a quantized matrix.
func checkMatrix(fn string, rows, cols, qk int) (int, error) {
	if err := checkPositive(fn, "rows", rows); err != nil {
		return 0, err
	}
	if err := checkCols(fn, "cols", cols, qk); err != nil {
		return 0, err
	}
	n, ok := mulOK(rows, cols)
	if !ok {
		return 0, argErr(fn, "rows", "rows*cols = %d*%d overflows int", rows, cols)
	}
	return n, nil
}
