//go:build !amd64

package threadpool

// cpuPause would execute the CPU's spin-wait hint; without an assembly version for this
// architecture the spin loop simply re-reads the line.
func cpuPause() {}

// curg has no portable implementation; 0 tells the misuse diagnostics to fall back to
// inspecting the call stack.
func curg() uintptr { return 0 }

// cputicks falls back to the monotonic clock: one tick per nanosecond.
func cputicks() int64 { return nanotime() }
