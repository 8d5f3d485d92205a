//go:build unix

package arena

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// cpuClock reports CPU ns per op of the benchmarking thread next to the wall-clock ns/op:
// the 2 cores are shared, and thread CPU time does not count the time other processes run.
type cpuClock struct{ start int64 }

func startCPU() cpuClock {
	runtime.LockOSThread() // the thread clock must follow the benchmark loop
	return cpuClock{threadNanos()}
}

func (c cpuClock) stop(b *testing.B) {
	b.ReportMetric(float64(threadNanos()-c.start)/float64(b.N), "cpu-ns/op")
	runtime.UnlockOSThread()
}

func threadNanos() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
