//go:build !unix

package sample

import "time"

// cpuTime is not measured here: the cpu-ns/op metric is then omitted.
func cpuTime() time.Duration { return 0 }
