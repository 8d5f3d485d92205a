package arena

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"
)

// FileOptions control MapFile.
type FileOptions struct {
	// Mlock locks the whole file in RAM (reading all of it now); failure is an error.
	Mlock bool
	// WillNeed issues MADV_WILLNEED (PrefetchVirtualMemory on Windows) so the kernel starts
	// reading the file ahead asynchronously; set it when loading weights that are about to
	// be used. The zero value gives no advice (pages are read on first touch).
	WillNeed bool
}

// FileMapping is a file mapped read-only (MAP_SHARED and PROT_READ; a read-only view of a
// file mapping object on Windows): its bytes come from the page cache with no copy, and
// writing them faults.
type FileMapping struct {
	path   string
	data   []byte
	locked bool // FileOptions.Mlock: Release leaves the pages alone
	closed atomic.Bool
}

// MapFile maps the file at path read-only. A zero-length file maps to an empty slice.
// The file must not be truncated while mapped (touching pages past the new end raises SIGBUS);
// on Windows the file cannot be deleted or truncated until Close.
func MapFile(path string, opts FileOptions) (*FileMapping, error) {
	// Stat before opening: opening a FIFO for reading blocks until a writer appears, so a
	// named pipe given as a model file would hang instead of being refused.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("arena: MapFile(%q): %w", path, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("arena: MapFile(%q): not a regular file (%s): %w", path, st.Mode().Type(), ErrMap)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("arena: MapFile(%q): %w", path, err)
	}
	defer f.Close() // the mapping keeps its own reference to the file
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("arena: MapFile(%q): %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("arena: MapFile(%q): not a regular file (%s): %w", path, st.Mode().Type(), ErrMap)
	}
	size := st.Size()
	if size == 0 {
		return &FileMapping{path: path, data: []byte{}}, nil
	}
	if size > int64(maxInt) {
		return nil, fmt.Errorf("arena: MapFile(%q): %d bytes do not fit in an int: %w", path, size, ErrBadSize)
	}
	data, err := mapFile(f, int(size), opts)
	if err != nil {
		return nil, fmt.Errorf("arena: MapFile(%q): %w: %w", path, err, ErrMap)
	}
	return &FileMapping{path: path, data: data, locked: opts.Mlock}, nil
}

// Bytes returns the file's contents (read-only: writing faults). It returns nil after Close;
// slices obtained before Close must not be used after it.
func (m *FileMapping) Bytes() []byte {
	if m.closed.Load() {
		return nil
	}
	return m.data
}

// Size returns the file's size in bytes as mapped.
func (m *FileMapping) Size() int { return len(m.data) }

// Path returns the path the file was mapped from.
func (m *FileMapping) Path() string { return m.path }

// Release tells the OS that this process no longer needs the mapped pages that lie wholly
// inside [offset, offset+n): they leave its resident set (MADV_DONTNEED) but stay in the page
// cache, clean and shared, and a later read faults them back in, unchanged. A loader that
// copied tensor data elsewhere calls it so the data does not count twice. It does nothing on
// Windows, on an empty range, or when the file was mapped with FileOptions.Mlock (the caller
// asked to keep it in RAM). The range must lie in the file; the mapping must be open.
func (m *FileMapping) Release(offset, n int) error {
	if m.closed.Load() {
		return fmt.Errorf("arena: FileMapping(%q).Release: the mapping is closed: %w", m.path, ErrMap)
	}
	if offset < 0 || n < 0 || offset > len(m.data) || n > len(m.data)-offset {
		return fmt.Errorf("arena: FileMapping(%q).Release(%d, %d): outside the %d-byte file: %w", m.path, offset, n, len(m.data), ErrBadSize)
	}
	// Whole pages only: the page around either end may hold bytes still in use.
	ps := os.Getpagesize()
	lo, hi := (offset+ps-1)/ps*ps, (offset+n)/ps*ps
	if m.locked || hi <= lo {
		return nil
	}
	if err := releaseFile(m.data[lo:hi]); err != nil {
		return fmt.Errorf("arena: FileMapping(%q).Release: %w: %w", m.path, err, ErrMap)
	}
	return nil
}

// Close unmaps the file. It is idempotent: later calls return nil.
func (m *FileMapping) Close() error {
	if !m.closed.CompareAndSwap(false, true) || len(m.data) == 0 {
		return nil
	}
	if err := unmapFile(m.data); err != nil {
		return fmt.Errorf("arena: FileMapping(%q).Close: %w: %w", m.path, err, ErrMap)
	}
	return nil
}

// FileView returns n elements of T at byte offset of the mapped file, in place (no copy),
// so a GGUF loader can hand tensor data straight to kernels. T must be pointer-free; the
// range must lie in the file and offset must suit T's alignment. The slice is read-only.
func FileView[T any](m *FileMapping, offset, n int) ([]T, error) {
	var z T
	size, talign := int(unsafe.Sizeof(z)), int(unsafe.Alignof(z))
	fail := func(format string, args ...any) ([]T, error) {
		return nil, fmt.Errorf("arena: FileView[%s](%q, offset=%d, n=%d): %w",
			typeName[T](), m.path, offset, n, fmt.Errorf(format, args...))
	}
	if err := pointerFree[T](); err != nil {
		return fail("%w", err)
	}
	data := m.Bytes()
	if data == nil {
		return fail("%w", ErrClosed)
	}
	if offset < 0 || n < 0 {
		return fail("negative offset or count: %w", ErrBadSize)
	}
	bytes, ok := mulOK(n, size)
	if !ok || offset > len(data) || bytes > len(data)-offset {
		return fail("range exceeds the %d-byte file: %w", len(data), ErrBadSize)
	}
	if n == 0 {
		return []T{}, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(data[offset:]))
	if uintptr(p)%uintptr(talign) != 0 {
		return fail("offset is not aligned to %d bytes: %w", talign, ErrBadAlign)
	}
	return unsafe.Slice((*T)(p), n), nil
}
