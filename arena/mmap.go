package arena

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// HugePageSize is the huge page size MAP_HUGETLB asks for and THP uses on x86-64.
const HugePageSize = 2 << 20

// pageSize is the base page (4 KiB on x86-64, 16 KiB on Apple silicon): the unit of guard
// pages and protection changes.
var pageSize = os.Getpagesize()

// PagePolicy says which kinds of pages New and NewFromLayout may try. Huge pages are a
// Linux feature here: on other systems Auto and ForcePlain map plain pages, and ForceTHP
// and ForceHugeTLB fail with ErrMap.
type PagePolicy int

const (
	// Auto tries MAP_HUGETLB (2 MiB pages from the reserved pool), then transparent huge
	// pages via MADV_HUGEPAGE, then plain pages. It is the zero value.
	Auto PagePolicy = iota
	// ForceTHP skips MAP_HUGETLB and fails unless MADV_HUGEPAGE is accepted and THP is enabled.
	ForceTHP
	// ForcePlain maps plain pages and marks them MADV_NOHUGEPAGE, so even THP "always"
	// mode leaves them alone (the baseline the huge-page benchmarks compare against).
	ForcePlain
	// ForceHugeTLB fails unless MAP_HUGETLB succeeds (needs reserved pages in
	// /proc/sys/vm/nr_hugepages).
	ForceHugeTLB
)

// String names the policy.
func (p PagePolicy) String() string {
	switch p {
	case Auto:
		return "auto"
	case ForceTHP:
		return "thp"
	case ForcePlain:
		return "plain"
	case ForceHugeTLB:
		return "hugetlb"
	}
	return fmt.Sprintf("PagePolicy(%d)", int(p))
}

// PageKind is what a mapping actually got.
type PageKind int

const (
	// Kind4K: plain base pages.
	Kind4K PageKind = iota
	// KindTHP: MADV_HUGEPAGE was accepted and THP is enabled; the kernel backs 2 MiB-aligned
	// chunks with huge pages when it can (Arena.HugeBacked says how much it did).
	KindTHP
	// KindHugeTLB: MAP_HUGETLB 2 MiB pages, reserved at mmap time.
	KindHugeTLB
)

// String returns "4k", "thp-madvise" or "hugetlb".
func (k PageKind) String() string {
	switch k {
	case Kind4K:
		return "4k"
	case KindTHP:
		return "thp-madvise"
	case KindHugeTLB:
		return "hugetlb"
	}
	return fmt.Sprintf("PageKind(%d)", int(k))
}

// Options control how an arena is mapped.
type Options struct {
	// Pages selects the page policy; the zero value is Auto.
	Pages PagePolicy
	// Prefault touches every page at creation (MAP_POPULATE for hugetlb, MADV_POPULATE_WRITE
	// otherwise, after MADV_HUGEPAGE so THP applies; one store per page on other systems) so
	// the first token pays no page faults.
	Prefault bool
	// Mlock locks the pages in RAM (mlock; VirtualLock on Windows); failure (e.g.
	// RLIMIT_MEMLOCK, or the working-set minimum on Windows) is an error, not ignored.
	Mlock bool
	// Guard (debug) puts a PROT_NONE page after the arena, or after each region of a
	// layout, so an overrun faults at once. It rules out MAP_HUGETLB, which can only be
	// protected in 2 MiB units.
	Guard bool
	// NoZero skips clearing memory that Alloc hands out again after a Reset. By default
	// such memory is cleared (fresh memory is zero already and is never touched), so Alloc
	// always returns zeroed memory like make; set NoZero when every consumer overwrites.
	NoZero bool
}

// mapping is one anonymous mapping and what backs it.
type mapping struct {
	base   unsafe.Pointer // first byte, aligned as requested
	length int            // bytes mapped, guard pages included
	kind   PageKind
	// alloc and allocLen are what the OS handed out, when that is more than [base,
	// base+length) and must be given back whole (a Windows reservation); nil on Unix, where
	// the surplus is unmapped at once.
	alloc    unsafe.Pointer
	allocLen int
}

// bytes returns [off, off+n) of the mapping.
func (m *mapping) bytes(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(m.base, off)), n)
}

// errNoHugePages is the reason ForceTHP and ForceHugeTLB fail outside Linux.
var errNoHugePages = errors.New("huge pages are only supported on Linux, not " + runtime.GOOS)

// mapAnon maps length bytes (a positive multiple of the page size) whose base is aligned to
// align (a power of two >= the page size), with no-access pages at the guard offsets
// (page-aligned, ascending), following opts. what names the request in errors.
func mapAnon(what string, length, align int, guards []int, opts Options) (*mapping, error) {
	if opts.Pages < Auto || opts.Pages > ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: unknown page policy %d: %w", what, int(opts.Pages), ErrMap)
	}
	if len(guards) > 0 && opts.Pages == ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: Guard needs 4 KiB protection, which MAP_HUGETLB cannot give: %w", what, ErrMap)
	}
	m, err := mapPages(what, length, align, len(guards) > 0, opts)
	if err != nil {
		return nil, err
	}
	if err := m.finish(what, guards, opts); err != nil {
		m.unmap()
		return nil, err
	}
	return m, nil
}

// finish protects the guard pages, then prefaults and locks the rest.
func (m *mapping) finish(what string, guards []int, opts Options) error {
	for _, g := range guards {
		if err := protectNone(m.bytes(g, pageSize)); err != nil {
			return fmt.Errorf("arena: %s: protect guard page at offset %d: %w: %w", what, g, err, ErrMap)
		}
	}
	prev := 0
	for _, g := range append(guards[:len(guards):len(guards)], m.length) {
		seg := m.bytes(prev, g-prev)
		prev = g + pageSize
		if len(seg) == 0 {
			continue
		}
		if opts.Prefault && m.kind != KindHugeTLB {
			if err := populate(seg); err != nil {
				return fmt.Errorf("arena: %s: prefault %d bytes: %w: %w", what, len(seg), err, ErrMap)
			}
		}
		if opts.Mlock {
			if err := lockPages(seg); err != nil {
				return fmt.Errorf("arena: %s: %w: %w", what, err, ErrMap)
			}
		}
	}
	return nil
}

// touchPages faults seg in for writing with one store per page: the portable prefault.
func touchPages(seg []byte) {
	for i := 0; i < len(seg); i += pageSize {
		seg[i] = 0 // fresh anonymous memory is zero: the store only faults the page in
	}
}
