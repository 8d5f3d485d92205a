package arena

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"
)

// faultAt runs f with faults turned into panics (debug.SetPanicOnFault) and reports the
// faulting address, or ok=false when f returned normally.
func faultAt(f func()) (addr uintptr, ok bool) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		e, isFault := r.(interface{ Addr() uintptr })
		if !isFault {
			panic(r)
		}
		addr, ok = e.Addr(), true
	}()
	f()
	return 0, false
}

// poke stores one byte at p (through a pointer, so no bounds check stands in the way).
func poke(p unsafe.Pointer) { *(*byte)(p) = 0x5a }

// addr returns the address of a slice's first element (valid for empty slices too).
func addr[T any](s []T) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }

// mustNew maps an arena or stops the test, and closes it at the end.
func mustNew(t *testing.T, size int, opts Options) *Arena {
	t.Helper()
	a, err := New(size, opts)
	if err != nil {
		t.Fatalf("New(%d, %+v): %v", size, opts, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// wantErr checks that err wraps target and mentions every fragment.
func wantErr(t *testing.T, err, target error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("error %q does not wrap %v", err, target)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}
