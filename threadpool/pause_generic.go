//go:build !amd64

package threadpool

import (
	"bytes"
	"runtime"
	"strconv"
)

// cpuPause would execute the CPU's spin-wait hint; without an assembly version for this
// architecture the spin loop simply re-reads the line.
func cpuPause() {}

// curg identifies the calling goroutine by the ID in its stack trace header ("goroutine 7
// [running]:"): slow (about a microsecond), but it runs only when a worker starts and on the
// misuse path, and without it a misused worker would be misreported as the caller.
func curg() uintptr {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		if id, err := strconv.ParseUint(string(b[:i]), 10, 64); err == nil {
			return uintptr(id)
		}
	}
	return 0 // unparsable: the diagnostics fall back to inspecting the call stack
}

// cputicks falls back to the monotonic clock: one tick per nanosecond.
func cputicks() int64 { return nanotime() }
