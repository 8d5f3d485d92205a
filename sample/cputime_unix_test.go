//go:build unix

package sample

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine it does not count the
// time the benchmark waits for a core, which wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
