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

// mapPopulate is MAP_POPULATE, which mapRaw holds back from oversized mappings.
const mapPopulate = unix.MAP_POPULATE

// mapPages maps the pages the policy asks for: MAP_HUGETLB first (Auto and ForceHugeTLB,
// never with guard pages), then base pages with the THP advice.
func mapPages(what string, length, align int, guarded bool, opts Options) (*mapping, error) {
	if (opts.Pages == Auto || opts.Pages == ForceHugeTLB) && !guarded {
		hl, ok := alignUpOK(length, HugePageSize)
		err := error(unix.ENOMEM)
		if ok {
			flags := unix.MAP_HUGETLB | unix.MAP_HUGE_2MB
			if opts.Prefault {
				flags |= unix.MAP_POPULATE
			}
			var p unsafe.Pointer
			if p, err = mapRaw(hl, max(align, HugePageSize), HugePageSize, flags); err == nil {
				return &mapping{base: p, length: hl, kind: KindHugeTLB}, nil
			}
		}
		if opts.Pages == ForceHugeTLB {
			free, ferr := freeHugePages()
			hint := "HugePages_Free unknown"
			if ferr == nil {
				hint = fmt.Sprintf("HugePages_Free=%d (reserve more in /proc/sys/vm/nr_hugepages)", free)
			}
			return nil, fmt.Errorf("arena: %s: MAP_HUGETLB of %d bytes: %w; %s: %w", what, length, err, hint, ErrMap)
		}
	}
	return mapNormal(what, length, align, opts)
}

// mapNormal maps base pages and applies the THP advice the policy asks for.
func mapNormal(what string, length, align int, opts Options) (*mapping, error) {
	if opts.Pages != ForcePlain && length >= HugePageSize {
		// THP only backs 2 MiB-aligned 2 MiB chunks: align the base so none is lost at the start.
		align = max(align, HugePageSize)
	}
	m, err := mapPlain(what, length, align)
	if err != nil {
		return nil, err
	}
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

// populate faults in seg for writing: MADV_POPULATE_WRITE (Linux 5.14+), else one store per page.
func populate(seg []byte) error {
	err := unix.Madvise(seg, unix.MADV_POPULATE_WRITE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	touchPages(seg)
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
