//go:build !linux

package threadpool

import (
	"errors"
	"runtime"
)

// errNoAffinity reports that this OS build has no sched_setaffinity.
var errNoAffinity = errors.New("thread affinity is not supported on " + runtime.GOOS)

// processAffinity assumes every CPU the runtime reports is usable.
func processAffinity() ([]int, error) {
	out := make([]int, runtime.NumCPU())
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// threadAffinity cannot be read here.
func threadAffinity() ([]int, error) { return nil, errNoAffinity }

// setThreadAffinity cannot pin here: the pool runs locked but unpinned.
func setThreadAffinity(cpus []int) error { return errNoAffinity }
