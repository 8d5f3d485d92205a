package arena

import (
	"fmt"
	"unsafe"
)

const (
	// DefaultAlign is the alignment Alloc gives: one cache line, and enough for any vector load.
	DefaultAlign = 64
	// WorkerAlign is where every per-worker slice starts and what its size is padded to.
	// 128 rather than 64: besides never sharing a line, no two workers share an aligned
	// pair of lines, which the adjacent-line prefetchers (Intel's spatial prefetcher, AMD's
	// L2 up/down prefetcher) fetch together and would otherwise bounce between cores.
	WorkerAlign = 128
	// MaxAlign bounds requested alignments; more would only waste address space.
	MaxAlign = 1 << 30
)

// Arena is one anonymous mapping handed out by bump allocation. One goroutine owns it
// (allocates, resets, closes), as the orchestrator plans and allocates from one goroutine:
// plain fields keep Alloc free of atomic read-modify-writes, and misuse from several
// goroutines is a data race on the Arena struct (Go heap) that -race reports. The memory it
// hands out may be used from any goroutine (AllocPerWorker gives each worker its own
// lines). Reset and Close must only be called once nobody uses the memory they give back.
type Arena struct {
	off    int            // next free byte, relative to base
	hwm    int            // highest end ever handed out: memory below it may be dirty
	closed bool           // set by Close; checked by everything that hands out memory
	base   unsafe.Pointer // first usable byte
	cap    int            // usable bytes from base
	m      *mapping
	noZero bool
	layout *Layout // the layout this arena was made from, nil for New
}

// New maps an arena of at least size bytes (Cap is size rounded up to 64) following opts.
// It reports which pages it obtained through PageKind.
func New(size int, opts Options) (*Arena, error) {
	what := fmt.Sprintf("New(size=%d)", size)
	if size <= 0 {
		return nil, fmt.Errorf("arena: %s: size must be positive: %w", what, ErrBadSize)
	}
	c, ok := alignUpOK(size, DefaultAlign)
	if !ok {
		return nil, fmt.Errorf("arena: %s: size overflows when rounded up to %d: %w", what, DefaultAlign, ErrBadSize)
	}
	length, ok := alignUpOK(c, pageSize)
	var guards []int
	if ok && opts.Guard {
		guards = []int{length}
		length, ok = addOK(length, pageSize)
	}
	if !ok {
		return nil, fmt.Errorf("arena: %s: size overflows when rounded up to pages: %w", what, ErrBadSize)
	}
	m, err := mapAnon(what, length, pageSize, guards, opts)
	if err != nil {
		return nil, err
	}
	start := 0
	if opts.Guard {
		// Put the usable window right against the guard page so that one byte past the
		// last allocation faults; the start stays 64-aligned as c and pages are.
		start = guards[0] - c
	}
	a := &Arena{base: unsafe.Add(m.base, start), cap: c, m: m, noZero: opts.NoZero}
	return a, nil
}

// Cap returns the usable bytes.
func (a *Arena) Cap() int { return a.cap }

// Used returns the bytes handed out since creation or the last Reset, padding included
// (0 once closed).
func (a *Arena) Used() int {
	if a.closed {
		return 0
	}
	return a.off
}

// Left returns the bytes still free (0 once closed). An aligned request may fit in less.
func (a *Arena) Left() int {
	if a.closed {
		return 0
	}
	return a.cap - a.off
}

// PageKind reports the pages the mapping got.
func (a *Arena) PageKind() PageKind { return a.m.kind }

// Closed reports whether Close was called.
func (a *Arena) Closed() bool { return a.closed }

// HugeBacked returns how many bytes of the arena's mapping the kernel currently backs with
// huge pages (from /proc/self/smaps): the figure a THP arena really obtained.
func (a *Arena) HugeBacked() (int, error) {
	if a.Closed() {
		return 0, fmt.Errorf("arena: HugeBacked: %w", ErrClosed)
	}
	lo := uintptr(a.m.base)
	n, err := hugeBacked(lo, lo+uintptr(a.m.length))
	if err != nil {
		return 0, fmt.Errorf("arena: HugeBacked: %w", err)
	}
	return n, nil
}

// Close unmaps the arena. It is idempotent; memory obtained from the arena must not be
// used afterwards.
func (a *Arena) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	if err := a.m.unmap(); err != nil {
		return fmt.Errorf("arena: Close: munmap %d bytes: %w: %w", a.m.length, err, ErrMap)
	}
	return nil
}

// Mark records the arena's current offset for a later Reset.
type Mark struct {
	a   *Arena
	off int
}

// Offset returns the offset the mark recorded.
func (m Mark) Offset() int { return m.off }

// Mark returns the current position; Reset(mark) frees everything allocated after it.
func (a *Arena) Mark() Mark { return Mark{a: a, off: a.off} }

// Reset gives back everything allocated since m was taken. Marks must be reset in LIFO
// order; a mark beyond the current offset (already given back) is refused. The memory is
// cleared lazily, when Alloc hands it out again (unless Options.NoZero).
func (a *Arena) Reset(m Mark) error {
	if m.a != a {
		return fmt.Errorf("arena: Reset(mark at %d): the mark belongs to another arena (or is the zero Mark): %w", m.off, ErrBadMark)
	}
	if a.closed {
		return fmt.Errorf("arena: Reset(mark at %d): %w", m.off, ErrClosed)
	}
	if m.off > a.off {
		return fmt.Errorf("arena: Reset(mark at %d): the arena is at %d, so the mark was already given back: %w",
			m.off, a.off, ErrBadMark)
	}
	a.off = m.off
	return nil
}

// reserve claims bytes at align (a power of two) and returns their start. The error text
// gives the numbers; the caller prefixes the request.
func (a *Arena) reserve(bytes, align int) (unsafe.Pointer, error) {
	if a.closed {
		return nil, ErrClosed
	}
	if bytes == 0 {
		// Nothing to claim: point at the base, which is mapped and aligned for any element
		// type, rather than at a bump offset that may sit just past the mapping.
		return a.base, nil
	}
	// Align the absolute address: the base is only guaranteed 64-aligned.
	base := uintptr(a.base)
	start := int((base+uintptr(a.off)+uintptr(align-1))&^uintptr(align-1) - base)
	if start > a.cap || bytes > a.cap-start {
		return nil, fmt.Errorf("needs %d bytes at alignment %d, %d of %d bytes left: %w",
			bytes, align, a.cap-a.off, a.cap, ErrExhausted)
	}
	end := start + bytes
	a.off = end
	p := unsafe.Add(a.base, start)
	if !a.noZero && start < a.hwm {
		// Memory below the high-water mark was handed out before a Reset: clear it.
		clear(unsafe.Slice((*byte)(p), min(end, a.hwm)-start))
	}
	a.hwm = max(a.hwm, end)
	return p, nil
}

// Alloc returns n zeroed elements of T aligned to DefaultAlign (64 bytes). T must hold no
// Go pointers. It does not allocate on the Go heap.
func Alloc[T any](a *Arena, n int) ([]T, error) {
	return allocAligned[T](a, n, DefaultAlign, "Alloc")
}

// AllocAligned is Alloc with an explicit alignment: a power of two up to MaxAlign (raised
// to T's own alignment if smaller).
func AllocAligned[T any](a *Arena, n, align int) ([]T, error) {
	return allocAligned[T](a, n, align, "AllocAligned")
}

func allocAligned[T any](a *Arena, n, align int, op string) ([]T, error) {
	var z T
	size, talign := int(unsafe.Sizeof(z)), int(unsafe.Alignof(z))
	if err := pointerFree[T](); err != nil {
		return nil, fmt.Errorf("arena: %s[%s](n=%d): %w", op, typeName[T](), n, err)
	}
	if n < 0 {
		return nil, fmt.Errorf("arena: %s[%s](n=%d): negative count: %w", op, typeName[T](), n, ErrBadSize)
	}
	if !isPow2(align) || align > MaxAlign {
		return nil, fmt.Errorf("arena: %s[%s](n=%d, align=%d): alignment must be a power of two in [1, %d]: %w",
			op, typeName[T](), n, align, MaxAlign, ErrBadAlign)
	}
	bytes, ok := mulOK(n, size)
	if !ok {
		return nil, fmt.Errorf("arena: %s[%s](n=%d): %d x %d bytes overflows: %w", op, typeName[T](), n, n, size, ErrBadSize)
	}
	p, err := a.reserve(bytes, max(align, talign))
	if err != nil {
		return nil, fmt.Errorf("arena: %s[%s](n=%d, align=%d): %w", op, typeName[T](), n, align, err)
	}
	return unsafe.Slice((*T)(p), n), nil
}

// AllocPerWorker returns workers slices of n zeroed elements each. Every slice starts on a
// WorkerAlign (128-byte) boundary and owns whole 128-byte blocks, so no two workers share a
// cache line or an adjacent-line prefetch pair. Each slice has cap == len.
func AllocPerWorker[T any](a *Arena, workers, n int) ([][]T, error) {
	var z T
	size, talign := int(unsafe.Sizeof(z)), int(unsafe.Alignof(z))
	what := func() string {
		return fmt.Sprintf("AllocPerWorker[%s](workers=%d, n=%d)", typeName[T](), workers, n)
	}
	if err := pointerFree[T](); err != nil {
		return nil, fmt.Errorf("arena: %s: %w", what(), err)
	}
	if workers < 1 || n < 0 {
		return nil, fmt.Errorf("arena: %s: need workers >= 1 and n >= 0: %w", what(), ErrBadSize)
	}
	stride, total, ok := workerStride(n, size, workers)
	if !ok {
		return nil, fmt.Errorf("arena: %s: %d workers x %d x %d bytes overflows: %w", what(), workers, n, size, ErrBadSize)
	}
	p, err := a.reserve(total, max(WorkerAlign, talign))
	if err != nil {
		return nil, fmt.Errorf("arena: %s: %w", what(), err)
	}
	out := make([][]T, workers)
	for w := range out {
		out[w] = unsafe.Slice((*T)(unsafe.Add(p, w*stride)), n)
	}
	return out, nil
}

// workerStride returns the padded bytes per worker and the total for all workers.
func workerStride(n, size, workers int) (stride, total int, ok bool) {
	per, ok := mulOK(n, size)
	if ok {
		stride, ok = alignUpOK(per, WorkerAlign)
	}
	if ok {
		total, ok = mulOK(stride, workers)
	}
	return stride, total, ok
}
