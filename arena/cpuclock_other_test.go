//go:build !unix

package arena

import "testing"

// cpuClock would report CPU ns per op next to wall-clock ns/op; this system has no
// per-thread CPU clock in x/sys, so only the wall clock is reported.
type cpuClock struct{}

func startCPU() cpuClock { return cpuClock{} }

func (c cpuClock) stop(b *testing.B) {}
