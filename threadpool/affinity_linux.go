//go:build linux

package threadpool

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// startAffinity is the process's CPU mask as the main thread had it during package
// initialisation, before anything could pin a thread. Asking later is unreliable: the
// calling thread may be pinned (PinCaller), and so may the main thread, since any
// goroutine can run there and lock itself to it.
var startAffinity, startAffinityErr = threadAffinity()

// processAffinity returns the CPUs the process may run on.
func processAffinity() ([]int, error) {
	if startAffinityErr != nil {
		return threadAffinity()
	}
	return startAffinity, nil
}

// threadAffinity returns the calling thread's CPU mask.
func threadAffinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return cpuSetList(&set), nil
}

// setThreadAffinity restricts the calling thread to cpus. The goroutine must be locked to
// its thread, or the mask ends up on whatever goroutine next runs there.
func setThreadAffinity(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("sched_setaffinity: cpu %d out of range", c)
		}
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity %v: %w", cpus, err)
	}
	return nil
}

func cpuSetList(set *unix.CPUSet) []int {
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}
