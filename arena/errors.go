package arena

import (
	"errors"
	"math/bits"
)

// Sentinel errors; every error this package returns wraps one of them (test with errors.Is)
// and adds the request and the numbers.
var (
	// ErrExhausted: the request does not fit in what is left of the arena.
	ErrExhausted = errors.New("arena exhausted")
	// ErrClosed: the arena or file mapping was closed.
	ErrClosed = errors.New("arena closed")
	// ErrBadSize: a negative, zero (where not allowed) or overflowing size or count.
	ErrBadSize = errors.New("bad size")
	// ErrBadAlign: an alignment that is not a power of two in [1, MaxAlign].
	ErrBadAlign = errors.New("bad alignment")
	// ErrHasPointers: the element type holds Go pointers, which the GC cannot see in arena memory.
	ErrHasPointers = errors.New("type holds Go pointers")
	// ErrPlan: a plan or layout was refused (duplicate name, unknown region, mismatch).
	ErrPlan = errors.New("bad plan")
	// ErrBadMark: a Reset to a mark of another arena, the zero Mark, or one already given back.
	ErrBadMark = errors.New("bad mark")
	// ErrNotFound: no buffer of that name in the layout.
	ErrNotFound = errors.New("no such buffer")
	// ErrType: the element type does not match the planned buffer.
	ErrType = errors.New("type mismatch")
	// ErrMap: the kernel refused a mapping, protection, advice or lock request.
	ErrMap = errors.New("mapping failed")
)

// mulOK returns a*b and whether it fits in an int (a, b >= 0).
func mulOK(a, b int) (int, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(maxInt) {
		return 0, false
	}
	return int(lo), true
}

// addOK returns a+b and whether it fits in an int (a, b >= 0).
func addOK(a, b int) (int, bool) {
	if b > maxInt-a {
		return 0, false
	}
	return a + b, true
}

// alignUpOK rounds x (>= 0) up to a multiple of align (a power of two) without overflowing.
func alignUpOK(x, align int) (int, bool) {
	y, ok := addOK(x, align-1)
	if !ok {
		return 0, false
	}
	return y &^ (align - 1), true
}

func isPow2(x int) bool { return x > 0 && x&(x-1) == 0 }

const maxInt = int(^uint(0) >> 1)
