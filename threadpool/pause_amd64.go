//go:build amd64

package threadpool

// cpuPause executes one PAUSE instruction. A spin loop needs it so that the spinning core
// frees pipeline resources and leaves the memory-order machine clear quickly when the
// watched line changes; the standard library does not expose it.
func cpuPause()

// curg returns the address of the calling goroutine's runtime g. It is used only to tell,
// when a Dispatch goes wrong, whether the caller is the dispatching goroutine or a worker
// (re-entrant use) or some other goroutine (concurrent use). The address is unique among
// live goroutines, which is all that comparison needs.
func curg() uintptr

// cputicks reads the time-stamp counter: about half the cost of the runtime's monotonic
// clock here, and it is on a worker's critical path for busy-time accounting. Stats
// converts ticks to nanoseconds against nanotime.
func cputicks() int64

// storeRelease stores v to *addr with a plain MOV. On x86 every store already has
// release ordering; what Go's atomic Store adds is a full fence (XCHG), which costs
// ~12 ns at the end of every dispatch here. Only for words whose readers need
// acquire/release, not sequential consistency.
//
//go:noescape
func storeRelease(addr *uint32, v uint32)
