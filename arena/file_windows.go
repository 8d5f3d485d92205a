package arena

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// prefetchVirtualMemory is kernel32's PrefetchVirtualMemory (Windows 8 and later), which
// x/sys/windows does not wrap.
var prefetchVirtualMemory = windows.NewLazySystemDLL("kernel32.dll").NewProc("PrefetchVirtualMemory")

// memoryRangeEntry is WIN32_MEMORY_RANGE_ENTRY.
type memoryRangeEntry struct {
	addr uintptr
	size uintptr
}

// mapFile maps size (> 0) bytes of f read-only (a file mapping object and a read-only view
// of it; the view keeps the object alive, so its handle is closed at once) and applies opts.
func mapFile(f *os.File, size int, opts FileOptions) ([]byte, error) {
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY,
		uint32(uint64(size)>>32), uint32(size), nil)
	if err != nil {
		return nil, fmt.Errorf("CreateFileMapping of %d bytes: %w", size, err)
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	windows.CloseHandle(h)
	if err != nil {
		return nil, fmt.Errorf("MapViewOfFile of %d bytes: %w", size, err)
	}
	data := unsafe.Slice((*byte)(ptr(addr)), size)
	if opts.WillNeed && prefetchVirtualMemory.Find() == nil {
		// Advice only: a refusal (old Windows, low memory) leaves pages read on first touch.
		entry := memoryRangeEntry{addr: addr, size: uintptr(size)}
		prefetchVirtualMemory.Call(uintptr(windows.CurrentProcess()), 1, uintptr(unsafe.Pointer(&entry)), 0)
	}
	if opts.Mlock {
		if err := windows.VirtualLock(addr, uintptr(size)); err != nil {
			windows.UnmapViewOfFile(addr)
			return nil, fmt.Errorf("VirtualLock %d bytes (bounded by the minimum working set size): %w", size, err)
		}
	}
	return data, nil
}

// unmapFile undoes mapFile.
func unmapFile(data []byte) error {
	if err := windows.UnmapViewOfFile(uintptr(unsafe.Pointer(unsafe.SliceData(data)))); err != nil {
		return fmt.Errorf("UnmapViewOfFile: %w", err)
	}
	return nil
}

// releaseFile does nothing: a view's pages leave the working set as Windows trims it, and
// unmapping part of a view is not possible.
func releaseFile(data []byte) error { return nil }
