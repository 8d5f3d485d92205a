//go:build unix

package arena

import (
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

func (m *mapping) unmap() error {
	return unix.MunmapPtr(m.base, uintptr(m.length))
}

// mapRaw mmaps length bytes (a multiple of natural, the page size for these flags) aligned to
// align; larger alignments are had by mapping align extra bytes and trimming both ends.
func mapRaw(length, align, natural, flags int) (unsafe.Pointer, error) {
	flags |= unix.MAP_PRIVATE | unix.MAP_ANON
	prot := unix.PROT_READ | unix.PROT_WRITE
	if align <= natural {
		return unix.MmapPtr(-1, 0, nil, uintptr(length), prot, flags)
	}
	total, ok := addOK(length, align)
	if !ok {
		return nil, unix.ENOMEM
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(total), prot, flags&^mapPopulate)
	if err != nil {
		return nil, err
	}
	head := int((uintptr(align) - uintptr(p)%uintptr(align)) % uintptr(align))
	if head > 0 {
		if err := unix.MunmapPtr(p, uintptr(head)); err != nil {
			unix.MunmapPtr(p, uintptr(total))
			return nil, err
		}
	}
	start := unsafe.Add(p, head)
	if tail := total - head - length; tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, length), uintptr(tail)); err != nil {
			unix.MunmapPtr(start, uintptr(total-head))
			return nil, err
		}
	}
	if mapPopulate != 0 && flags&mapPopulate != 0 {
		// MAP_POPULATE was held back from the oversized mapping; fault in what remains.
		if err := populate(unsafe.Slice((*byte)(start), length)); err != nil {
			unix.MunmapPtr(start, uintptr(length))
			return nil, err
		}
	}
	return start, nil
}

// mapPlain maps plain pages aligned to align, for the policies that want no huge pages.
func mapPlain(what string, length, align int) (*mapping, error) {
	p, err := mapRaw(length, align, pageSize, 0)
	if err != nil {
		return nil, fmt.Errorf("arena: %s: mmap %d bytes: %w: %w", what, length, err, ErrMap)
	}
	return &mapping{base: p, length: length, kind: Kind4K}, nil
}

// protectNone makes b (whole pages) inaccessible.
func protectNone(b []byte) error {
	if err := unix.Mprotect(b, unix.PROT_NONE); err != nil {
		return fmt.Errorf("mprotect: %w", err)
	}
	return nil
}

// lockPages locks seg in RAM; the error names the RLIMIT_MEMLOCK it ran into.
func lockPages(seg []byte) error {
	err := unix.Mlock(seg)
	if err == nil {
		return nil
	}
	var rl unix.Rlimit
	limit := "unknown"
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil {
		limit = strconv.FormatUint(uint64(rl.Cur), 10)
	}
	return fmt.Errorf("mlock %d bytes (RLIMIT_MEMLOCK %s bytes): %w", len(seg), limit, err)
}
