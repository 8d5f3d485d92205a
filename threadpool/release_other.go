//go:build !amd64 || race

package threadpool

import "sync/atomic"

// releaseBusy frees the dispatch slot at the end of a dispatch. Without the amd64 plain
// store (or under the race detector, which must see the release) it is an atomic store.
func releaseBusy(busy *atomic.Uint32) { busy.Store(busyIdle) }
