//go:build !darwin

package threadpool

// platformEfficiencySource names platformEfficiency in UsableCores's reason.
const platformEfficiencySource = "cpuid topology scan"

// platformEfficiency falls back to cpuid when sysfs did not say which cores are efficient.
func platformEfficiency() (map[int]bool, error) { return cpuidEfficiency() }
