//go:build !linux

package arena

import (
	"errors"
	"testing"
)

// Outside Linux there are only plain pages: Auto takes them, the huge-page policies refuse.
func TestPagePoliciesNoHugePages(t *testing.T) {
	const size = 4 << 20
	a := mustNew(t, size, Options{Prefault: true})
	if a.PageKind() != Kind4K {
		t.Fatalf("Auto got %v, want 4k", a.PageKind())
	}
	for _, p := range []PagePolicy{ForceTHP, ForceHugeTLB} {
		_, err := New(size, Options{Pages: p})
		wantErr(t, err, ErrMap, p.String(), "only supported on Linux")
	}
	if _, err := a.HugeBacked(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HugeBacked: %v, want ErrUnsupported", err)
	}
	if _, err := HugePagesBacked(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HugePagesBacked: %v, want ErrUnsupported", err)
	}
}

// A small lock is within the default limits of every supported system.
func TestMlockSmall(t *testing.T) {
	a := mustNew(t, 64<<10, Options{Mlock: true, Pages: ForcePlain})
	if a.Cap() != 64<<10 {
		t.Fatalf("Cap %d", a.Cap())
	}
}
