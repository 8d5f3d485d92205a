package kernelrt

import (
	"errors"
	"fmt"
)

// ErrClosed is wrapped by every error of a call on a closed (or nil) Runtime; test with
// errors.Is.
var ErrClosed = errors.New("kernelrt: Runtime is closed")

// OptionError reports a Runtime option (or a table setting) that cannot work.
type OptionError struct {
	Option string // e.g. "Threads"
	Value  string // the value given
	Reason string // what is wrong
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("kernelrt: option %s = %s: %s", e.Option, e.Value, e.Reason)
}

// ArgError reports an argument that a kernel refused before running.
type ArgError struct {
	Func string // e.g. "GemvQ8_0"
	Arg  string // e.g. "w"
	Msg  string // what is wrong, with the numbers
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("kernelrt.%s: %s: %s", e.Func, e.Arg, e.Msg)
}

func argErr(fn, arg, format string, a ...any) error {
	return &ArgError{Func: fn, Arg: arg, Msg: fmt.Sprintf(format, a...)}
}

// checkPositive refuses sizes <= 0.
func checkPositive(fn, arg string, n int) error {
	if n <= 0 {
		return argErr(fn, arg, "must be positive, got %d", n)
	}
	return nil
}

// checkCols refuses a column count that is not a positive multiple of the block size.
func checkCols(fn, arg string, cols, qk int) error {
	if cols <= 0 || cols%qk != 0 {
		return argErr(fn, arg, "must be a positive multiple of %d, got %d", qk, cols)
	}
	return nil
}

// checkLen refuses a nil slice or one whose length is not exactly want.
func checkLen[T any](fn, arg string, s []T, want int, what string) error {
	if s == nil {
		return argErr(fn, arg, "is nil, want %d %s", want, what)
	}
	if len(s) != want {
		return argErr(fn, arg, "has length %d, want %d %s", len(s), want, what)
	}
	return nil
}

// mulOK returns a*b and whether it fits in an int without overflow (a, b >= 0).
func mulOK(a, b int) (int, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || c < 0 {
		return 0, false
	}
	return c, true
}

// errClosedOp is the error of a Runtime method called on a nil *Runtime.
func errClosedOp(fn string) error {
	return fmt.Errorf("kernelrt.Runtime.%s: nil Runtime: %w", fn, ErrClosed)
}
