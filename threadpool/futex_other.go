//go:build !linux

package threadpool

import (
	"sync/atomic"
	"time"
)

// futexWait is the portable fallback: without a futex it naps briefly and lets the caller
// re-check its condition. Every sleeper in this package loops on its condition, so a wake
// can never be missed, only noticed up to one nap late.
func futexWait(addr *atomic.Uint32, val uint32) {
	if addr.Load() == val {
		time.Sleep(50 * time.Microsecond)
	}
}

// futexWake has nothing to do in the fallback: sleepers poll.
func futexWake(addr *atomic.Uint32, n int) {}
