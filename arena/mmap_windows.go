package arena

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// allocGranularity is where VirtualAlloc places reservations: alignments up to it come free.
const allocGranularity = 64 << 10

// mapPages reserves and commits plain pages with VirtualAlloc. Large pages (MEM_LARGE_PAGES)
// need the SeLockMemoryPrivilege, which ordinary accounts lack, so the huge-page policies
// fail here. A larger alignment is had by reserving align extra bytes and committing only
// the aligned window; the whole reservation is released by unmap.
func mapPages(what string, length, align int, guarded bool, opts Options) (*mapping, error) {
	if opts.Pages == ForceTHP || opts.Pages == ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: %v: %w: %w", what, opts.Pages, errNoHugePages, ErrMap)
	}
	if align <= allocGranularity {
		p, err := windows.VirtualAlloc(0, uintptr(length), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
		if err != nil {
			return nil, fmt.Errorf("arena: %s: VirtualAlloc %d bytes: %w: %w", what, length, err, ErrMap)
		}
		return &mapping{base: ptr(p), length: length, kind: Kind4K}, nil
	}
	total, ok := addOK(length, align)
	if !ok {
		return nil, fmt.Errorf("arena: %s: VirtualAlloc %d bytes aligned to %d: size overflows: %w", what, length, align, ErrMap)
	}
	res, err := windows.VirtualAlloc(0, uintptr(total), windows.MEM_RESERVE, windows.PAGE_NOACCESS)
	if err != nil {
		return nil, fmt.Errorf("arena: %s: VirtualAlloc (reserve) %d bytes: %w: %w", what, total, err, ErrMap)
	}
	start := (res + uintptr(align) - 1) &^ (uintptr(align) - 1)
	if _, err := windows.VirtualAlloc(start, uintptr(length), windows.MEM_COMMIT, windows.PAGE_READWRITE); err != nil {
		windows.VirtualFree(res, 0, windows.MEM_RELEASE)
		return nil, fmt.Errorf("arena: %s: VirtualAlloc (commit) %d bytes: %w: %w", what, length, err, ErrMap)
	}
	return &mapping{base: ptr(start), length: length, kind: Kind4K, alloc: ptr(res), allocLen: total}, nil
}

// ptr turns an address the OS returned (memory the Go heap does not manage) into a pointer;
// the indirection keeps vet's unsafeptr check, which is about Go-managed memory, quiet.
func ptr(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

func (m *mapping) unmap() error {
	base := m.base
	if m.alloc != nil {
		base = m.alloc
	}
	return windows.VirtualFree(uintptr(base), 0, windows.MEM_RELEASE)
}

// protectNone makes b (whole pages) inaccessible.
func protectNone(b []byte) error {
	var old uint32
	if err := windows.VirtualProtect(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), windows.PAGE_NOACCESS, &old); err != nil {
		return fmt.Errorf("VirtualProtect: %w", err)
	}
	return nil
}

// lockPages locks seg in RAM. VirtualLock is bounded by the process's minimum working set
// (a few hundred KiB by default), so large locks fail unless the caller raised it.
func lockPages(seg []byte) error {
	if err := windows.VirtualLock(uintptr(unsafe.Pointer(unsafe.SliceData(seg))), uintptr(len(seg))); err != nil {
		return fmt.Errorf("VirtualLock %d bytes (bounded by the minimum working set size): %w", len(seg), err)
	}
	return nil
}

// populate faults seg in with one store per page.
func populate(seg []byte) error {
	touchPages(seg)
	return nil
}

// HugePagesBacked is unsupported outside Linux: the error wraps errors.ErrUnsupported.
func HugePagesBacked() (int, error) {
	return 0, fmt.Errorf("arena: HugePagesBacked: %w", errors.ErrUnsupported)
}

// hugeBacked has no smaps to read here.
func hugeBacked(lo, hi uintptr) (int, error) { return 0, errors.ErrUnsupported }
