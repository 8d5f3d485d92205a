package threadpool

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// platformEfficiencySource names platformEfficiency in UsableCores's reason.
const platformEfficiencySource = "sysctl hw.perflevel0"

// platformEfficiency reads the performance levels of Apple silicon: without it the default
// pool would include the efficiency cores, and every statically split dispatch would wait
// for them. Intel Macs have no hw.nperflevels and are not hybrid.
func platformEfficiency() (map[int]bool, error) {
	levels, err := unix.SysctlUint32("hw.nperflevels")
	if err != nil {
		return nil, nil
	}
	perf0, err := unix.SysctlUint32("hw.perflevel0.physicalcpu")
	if err != nil {
		return nil, err
	}
	return perfLevelEfficiency(runtime.NumCPU(), int(levels), int(perf0))
}
