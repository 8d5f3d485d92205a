//go:build unix

package arena

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size (> 0) bytes of f read-only and applies opts.
func mapFile(f *os.File, size int, opts FileOptions) ([]byte, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	if opts.WillNeed {
		if err := unix.Madvise(data, unix.MADV_WILLNEED); err != nil {
			unix.Munmap(data)
			return nil, fmt.Errorf("MADV_WILLNEED on %d bytes: %w", size, err)
		}
	}
	if opts.Mlock {
		if err := unix.Mlock(data); err != nil {
			unix.Munmap(data)
			return nil, fmt.Errorf("mlock %d bytes: %w", size, err)
		}
	}
	return data, nil
}

// unmapFile undoes mapFile.
func unmapFile(data []byte) error {
	if err := unix.Munmap(data); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}

// releaseFile drops data's pages (page-aligned) from the process's resident set.
func releaseFile(data []byte) error {
	if err := unix.Madvise(data, unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("MADV_DONTNEED on %d bytes: %w", len(data), err)
	}
	return nil
}
