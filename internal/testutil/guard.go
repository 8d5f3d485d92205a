// Package testutil holds helpers shared by kernelrt's tests.
package testutil

import (
	"fmt"
	"os"
	"unsafe"
)

// Guarded is a read-write region with a PROT_NONE page directly before and after it, so a
// kernel that reads or writes one byte outside the region faults at once.
type Guarded struct {
	mem  []byte // the whole mapping, guards included
	body []byte // the usable pages
}

// NewGuarded maps n usable bytes (rounded up to whole pages) between two inaccessible pages.
func NewGuarded(n int) (*Guarded, error) {
	ps := os.Getpagesize()
	pages := (n + ps - 1) / ps
	if pages == 0 {
		pages = 1
	}
	mem, err := mapGuarded(pages*ps, ps)
	if err != nil {
		return nil, fmt.Errorf("testutil: map %d pages: %w", pages+2, err)
	}
	return &Guarded{mem: mem, body: mem[ps : (pages+1)*ps]}, nil
}

// Close unmaps the region.
func (g *Guarded) Close() error { return unmapGuarded(g.mem) }

// Tail returns the last `bytes` bytes of the region: the byte after them is a guard page.
func (g *Guarded) Tail(bytes int) []byte {
	if bytes > len(g.body) {
		panic(fmt.Sprintf("testutil: Tail(%d) of a %d-byte region", bytes, len(g.body)))
	}
	return g.body[len(g.body)-bytes:]
}

// Head returns the first `bytes` bytes of the region: the byte before them is a guard page.
func (g *Guarded) Head(bytes int) []byte {
	if bytes > len(g.body) {
		panic(fmt.Sprintf("testutil: Head(%d) of a %d-byte region", bytes, len(g.body)))
	}
	return g.body[:bytes]
}

// TailOf returns n elements of T ending exactly at the guard page after the region.
func TailOf[T any](g *Guarded, n int) []T {
	var z T
	b := g.Tail(n * int(unsafe.Sizeof(z)))
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// HeadOf returns n elements of T starting exactly after the guard page before the region.
func HeadOf[T any](g *Guarded, n int) []T {
	var z T
	b := g.Head(n * int(unsafe.Sizeof(z)))
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}
