package arena

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePageSize is the huge page size MAP_HUGETLB asks for and THP uses on x86-64.
const HugePageSize = 2 << 20

// pageSize is the base page: the unit of guard pages and mprotect.
var pageSize = unix.Getpagesize()

// PagePolicy says which kinds of pages New and NewFromLayout may try.
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
	// otherwise, after MADV_HUGEPAGE so THP applies) so the first token pays no page faults.
	Prefault bool
	// Mlock locks the pages in RAM; failure (e.g. RLIMIT_MEMLOCK) is an error, not ignored.
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

// mapping is one anonymous mmap and what backs it.
type mapping struct {
	base   unsafe.Pointer // first byte, aligned as requested
	length int            // bytes mapped, guard pages included
	kind   PageKind
}

// bytes returns [off, off+n) of the mapping.
func (m *mapping) bytes(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(m.base, off)), n)
}

func (m *mapping) unmap() error {
	return unix.MunmapPtr(m.base, uintptr(m.length))
}

// mapAnon maps length bytes (a positive multiple of the page size) whose base is aligned to
// align (a power of two >= the page size), with PROT_NONE pages at the guard offsets
// (page-aligned, ascending), following opts. what names the request in errors.
func mapAnon(what string, length, align int, guards []int, opts Options) (*mapping, error) {
	if opts.Pages < Auto || opts.Pages > ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: unknown page policy %d: %w", what, int(opts.Pages), ErrMap)
	}
	if len(guards) > 0 && opts.Pages == ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: Guard needs 4 KiB protection, which MAP_HUGETLB cannot give: %w", what, ErrMap)
	}
	var m *mapping
	if (opts.Pages == Auto || opts.Pages == ForceHugeTLB) && len(guards) == 0 {
		hl, ok := alignUpOK(length, HugePageSize)
		var err error
		if ok {
			flags := unix.MAP_HUGETLB | unix.MAP_HUGE_2MB
			if opts.Prefault {
				flags |= unix.MAP_POPULATE
			}
			var p unsafe.Pointer
			p, err = mapRaw(hl, max(align, HugePageSize), HugePageSize, flags)
			if err == nil {
				m = &mapping{base: p, length: hl, kind: KindHugeTLB}
			}
		} else {
			err = unix.ENOMEM
		}
		if m == nil && opts.Pages == ForceHugeTLB {
			free, ferr := freeHugePages()
			hint := "HugePages_Free unknown"
			if ferr == nil {
				hint = fmt.Sprintf("HugePages_Free=%d (reserve more in /proc/sys/vm/nr_hugepages)", free)
			}
			return nil, fmt.Errorf("arena: %s: MAP_HUGETLB of %d bytes: %w; %s: %w", what, length, err, hint, ErrMap)
		}
	}
	if m == nil {
		var err error
		if m, err = mapNormal(what, length, align, opts); err != nil {
			return nil, err
		}
	}
	if err := m.finish(what, guards, opts); err != nil {
		m.unmap()
		return nil, err
	}
	return m, nil
}

// mapNormal maps base pages and applies the THP advice the policy asks for.
func mapNormal(what string, length, align int, opts Options) (*mapping, error) {
	if opts.Pages != ForcePlain && length >= HugePageSize {
		// THP only backs 2 MiB-aligned 2 MiB chunks: align the base so none is lost at the start.
		align = max(align, HugePageSize)
	}
	p, err := mapRaw(length, align, pageSize, 0)
	if err != nil {
		return nil, fmt.Errorf("arena: %s: mmap %d bytes: %w: %w", what, length, err, ErrMap)
	}
	m := &mapping{base: p, length: length, kind: Kind4K}
	all := m.bytes(0, length)
	if opts.Pages == ForcePlain {
		// Ignored error: a kernel without THP refuses the advice and has no THP to avoid.
		_ = unix.Madvise(all, unix.MADV_NOHUGEPAGE)
		return m, nil
	}
	err = unix.Madvise(all, unix.MADV_HUGEPAGE)
	mode := thpMode()
	if err == nil && mode != "never" && mode != "" {
		m.kind = KindTHP
	} else if opts.Pages == ForceTHP {
		m.unmap()
		if err == nil {
			err = fmt.Errorf("transparent_hugepage/enabled is %q", mode)
		}
		return nil, fmt.Errorf("arena: %s: ForceTHP: MADV_HUGEPAGE on %d bytes: %w: %w", what, length, err, ErrMap)
	}
	return m, nil
}

// mapRaw mmaps length bytes (a multiple of natural, the page size for these flags) aligned to
// align; larger alignments are had by mapping align extra bytes and trimming both ends.
func mapRaw(length, align, natural, flags int) (unsafe.Pointer, error) {
	flags |= unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	prot := unix.PROT_READ | unix.PROT_WRITE
	if align <= natural {
		return unix.MmapPtr(-1, 0, nil, uintptr(length), prot, flags)
	}
	total, ok := addOK(length, align)
	if !ok {
		return nil, unix.ENOMEM
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(total), prot, flags&^unix.MAP_POPULATE)
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
	if flags&unix.MAP_POPULATE != 0 {
		// MAP_POPULATE was held back from the oversized mapping; fault in what remains.
		if err := populate(unsafe.Slice((*byte)(start), length)); err != nil {
			unix.MunmapPtr(start, uintptr(length))
			return nil, err
		}
	}
	return start, nil
}

// finish protects the guard pages, then prefaults and locks the rest.
func (m *mapping) finish(what string, guards []int, opts Options) error {
	for _, g := range guards {
		if err := unix.Mprotect(m.bytes(g, pageSize), unix.PROT_NONE); err != nil {
			return fmt.Errorf("arena: %s: mprotect guard page at offset %d: %w: %w", what, g, err, ErrMap)
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
			if err := unix.Mlock(seg); err != nil {
				var rl unix.Rlimit
				limit := "unknown"
				if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil {
					limit = strconv.FormatUint(rl.Cur, 10)
				}
				return fmt.Errorf("arena: %s: mlock %d bytes (RLIMIT_MEMLOCK %s bytes): %w: %w",
					what, len(seg), limit, err, ErrMap)
			}
		}
	}
	return nil
}

// populate faults in seg for writing: MADV_POPULATE_WRITE (Linux 5.14+), else one store per page.
func populate(seg []byte) error {
	err := unix.Madvise(seg, unix.MADV_POPULATE_WRITE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	for i := 0; i < len(seg); i += pageSize {
		seg[i] = 0 // fresh anonymous memory is zero: the store only faults the page in
	}
	return nil
}

var thpOnce struct {
	sync.Once
	mode string
}

// thpMode returns the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
// ("always", "madvise", "never"), or "" when THP is absent.
func thpMode() string {
	thpOnce.Do(func() {
		b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if err != nil {
			return
		}
		if i := bytes.IndexByte(b, '['); i >= 0 {
			if j := bytes.IndexByte(b[i:], ']'); j > 0 {
				thpOnce.mode = string(b[i+1 : i+j])
			}
		}
	})
	return thpOnce.mode
}

// freeHugePages reads HugePages_Free (2 MiB pages not yet reserved) from /proc/meminfo.
func freeHugePages() (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "HugePages_Free:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("arena: /proc/meminfo has no HugePages_Free line")
}

// HugePagesBacked returns how many bytes of this process's memory are backed by huge pages
// right now (AnonHugePages + Private_Hugetlb + Shared_Hugetlb from /proc/self/smaps_rollup).
func HugePagesBacked() (int, error) {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, fmt.Errorf("arena: HugePagesBacked: %w", err)
	}
	total := 0
	for _, line := range strings.Split(string(b), "\n") {
		if kb, ok := hugeField(line); ok {
			total += kb << 10
		}
	}
	return total, nil
}

// hugeBacked sums the huge-page-backed bytes of the VMAs overlapping [lo, hi), each clipped
// to its overlap. Adjacent mappings with identical flags may share a VMA with ours; the
// clipping keeps the figure at most hi-lo but it can then include the neighbour's pages.
func hugeBacked(lo, hi uintptr) (int, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	total, vmaHuge, overlap := 0, 0, 0
	flush := func() {
		total += min(vmaHuge, overlap)
		vmaHuge, overlap = 0, 0
	}
	for sc.Scan() {
		line := sc.Text()
		if kb, ok := hugeField(line); ok {
			vmaHuge += kb << 10
			continue
		}
		// A VMA header looks like "7f12a0000000-7f12a0200000 rw-p 00000000 00:00 0".
		field, _, _ := strings.Cut(line, " ")
		a, b, isRange := strings.Cut(field, "-")
		if !isRange || strings.HasSuffix(field, ":") {
			continue
		}
		start, err1 := strconv.ParseUint(a, 16, 64)
		end, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		flush()
		if s, e := max(uintptr(start), lo), min(uintptr(end), hi); s < e {
			overlap = int(e - s)
		}
	}
	flush()
	return total, sc.Err()
}

// hugeField parses the smaps lines that count huge-page-backed memory, in kB.
func hugeField(line string) (int, bool) {
	for _, key := range [...]string{"AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"} {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb, err == nil
		}
	}
	return 0, false
}
