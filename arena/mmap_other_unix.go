//go:build unix && !linux

package arena

import (
	"errors"
	"fmt"
)

// mapPopulate: only Linux has MAP_POPULATE.
const mapPopulate = 0

// mapPages maps plain pages: this system has neither MAP_HUGETLB nor THP advice that the
// package knows how to ask for, so the huge-page policies fail rather than silently
// degrade.
func mapPages(what string, length, align int, guarded bool, opts Options) (*mapping, error) {
	if opts.Pages == ForceTHP || opts.Pages == ForceHugeTLB {
		return nil, fmt.Errorf("arena: %s: %v: %w: %w", what, opts.Pages, errNoHugePages, ErrMap)
	}
	return mapPlain(what, length, align)
}

// populate faults seg in with one store per page (there is no MADV_POPULATE_WRITE here).
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
