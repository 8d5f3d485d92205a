//go:build amd64 && !race

package threadpool

import (
	"sync/atomic"
	"unsafe"
)

// releaseBusy frees the dispatch slot at the end of a dispatch. It needs release
// ordering only (the next dispatcher's CAS must see everything this one wrote), which a
// plain x86 store gives.
func releaseBusy(busy *atomic.Uint32) {
	storeRelease((*uint32)(unsafe.Pointer(busy)), busyIdle)
}
