package arena

import (
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// The policies every system has; the huge-page ones are tested per OS.
func TestPagePolicies(t *testing.T) {
	const size = 4 << 20
	t.Run("plain", func(t *testing.T) {
		a := mustNew(t, size, Options{Pages: ForcePlain, Prefault: true})
		if a.PageKind() != Kind4K || a.PageKind().String() != "4k" {
			t.Fatalf("ForcePlain got %v", a.PageKind())
		}
		b, err := Alloc[byte](a, size)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("byte %d of a fresh arena is %d", i, b[i])
			}
		}
		b[0], b[size-1] = 1, 1
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := New(size, Options{Pages: PagePolicy(9)})
		wantErr(t, err, ErrMap, "unknown page policy 9")
	})
}

func TestAllocAlignment(t *testing.T) {
	a := mustNew(t, 1<<20, Options{Pages: ForcePlain})
	lo, hi := uintptr(a.base), uintptr(a.base)+uintptr(a.Cap())
	type span struct{ start, end uintptr }
	var spans []span
	check := func(name string, p uintptr, bytes, n, length, capacity, align, talign int) {
		t.Helper()
		if length != n || capacity != n {
			t.Fatalf("%s: len/cap %d/%d, want %d", name, length, capacity, n)
		}
		if p%uintptr(align) != 0 || p%uintptr(talign) != 0 {
			t.Fatalf("%s: address %#x not aligned to %d (type align %d)", name, p, align, talign)
		}
		if p < lo || p+uintptr(bytes) > hi {
			t.Fatalf("%s: [%#x, %#x) outside the arena [%#x, %#x)", name, p, p+uintptr(bytes), lo, hi)
		}
		spans = append(spans, span{p, p + uintptr(bytes)})
	}
	type odd struct {
		a int8
		b float64
		c [3]uint16
	}
	for _, align := range []int{1, 2, 8, 64, 128, 256, 4096} {
		for _, n := range []int{1, 3, 17, 100} {
			f, err := AllocAligned[float32](a, n, align)
			if err != nil {
				t.Fatal(err)
			}
			check("float32", addr(f), 4*n, n, len(f), cap(f), align, 4)
			b, err := AllocAligned[[3]byte](a, n, align)
			if err != nil {
				t.Fatal(err)
			}
			check("[3]byte", addr(b), 3*n, n, len(b), cap(b), align, 1)
			o, err := AllocAligned[odd](a, n, align)
			if err != nil {
				t.Fatal(err)
			}
			check("odd", addr(o), int(unsafe.Sizeof(odd{}))*n, n, len(o), cap(o), align, 8)
		}
	}
	for _, n := range []int{1, 5, 64} {
		c, err := Alloc[complex128](a, n)
		if err != nil {
			t.Fatal(err)
		}
		check("Alloc complex128", addr(c), 16*n, n, len(c), cap(c), DefaultAlign, 8)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Fatalf("allocations overlap: [%#x,%#x) and [%#x,%#x)", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
	if last := spans[len(spans)-1].end; int(last-lo) != a.Used() {
		t.Fatalf("Used = %d, last allocation ends at %d", a.Used(), last-lo)
	}
}

func TestResetReusesAndZeroes(t *testing.T) {
	a := mustNew(t, 1<<16, Options{})
	head, err := Alloc[byte](a, 10)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Mark()
	x, err := Alloc[uint32](a, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		x[i] = 0xdeadbeef
	}
	used := a.Used()
	if err := a.Reset(m); err != nil {
		t.Fatal(err)
	}
	if a.Used() != m.Offset() || m.Offset() != len(head) {
		t.Fatalf("after Reset Used = %d, mark %d, want %d", a.Used(), m.Offset(), len(head))
	}
	// A larger request reuses the old memory and runs into fresh memory past the old end.
	y, err := Alloc[uint32](a, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if addr(y) != addr(x) {
		t.Fatalf("Reset did not reuse memory: first at %#x, then at %#x", addr(x), addr(y))
	}
	for i, v := range y {
		if v != 0 {
			t.Fatalf("reused memory not zeroed: y[%d] = %#x", i, v)
		}
	}
	if a.Used() <= used {
		t.Fatalf("Used %d after the larger allocation, was %d", a.Used(), used)
	}

	// With NoZero the old contents stay (the caller promised to overwrite them).
	b := mustNew(t, 1<<16, Options{NoZero: true})
	m = b.Mark()
	x, _ = Alloc[uint32](b, 100)
	for i := range x {
		x[i] = uint32(i) + 1
	}
	if err := b.Reset(m); err != nil {
		t.Fatal(err)
	}
	y, _ = Alloc[uint32](b, 100)
	if addr(y) != addr(x) || y[99] != 100 {
		t.Fatalf("NoZero: got %#x (was %#x), y[99] = %d, want the old 100", addr(y), addr(x), y[99])
	}
}

func TestResetErrors(t *testing.T) {
	a := mustNew(t, 1<<12, Options{})
	b := mustNew(t, 1<<12, Options{})
	wantErr(t, a.Reset(b.Mark()), ErrBadMark, "another arena")
	wantErr(t, a.Reset(Mark{}), ErrBadMark, "zero Mark")
	m0 := a.Mark()
	Alloc[byte](a, 100)
	m1 := a.Mark()
	if err := a.Reset(m0); err != nil {
		t.Fatal(err)
	}
	wantErr(t, a.Reset(m1), ErrBadMark, "mark at 100", "arena is at 0")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, a.Reset(m0), ErrClosed)
}

func TestExhaustion(t *testing.T) {
	a := mustNew(t, 4096, Options{})
	if _, err := Alloc[float32](a, 1000); err != nil {
		t.Fatal(err)
	}
	used := a.Used()
	_, err := Alloc[float32](a, 25)
	wantErr(t, err, ErrExhausted, "Alloc[float32](n=25, align=64)", "needs 100 bytes", "96 of 4096 bytes left")
	if a.Used() != used {
		t.Fatalf("failed Alloc moved Used from %d to %d", used, a.Used())
	}
	// Fits in size but not after alignment.
	_, err = AllocAligned[byte](a, 1, 8192)
	wantErr(t, err, ErrExhausted, "AllocAligned[uint8](n=1, align=8192)", "needs 1 bytes at alignment 8192")
	// Exactly what is left still fits (at float32's own alignment: 4000 is not 64-aligned).
	rest, err := AllocAligned[float32](a, 24, 4)
	if err != nil || a.Left() != 0 || len(rest) != 24 {
		t.Fatalf("filling the last 96 bytes: err %v, Left %d", err, a.Left())
	}
	_, err = AllocPerWorker[float32](a, 2, 1)
	wantErr(t, err, ErrExhausted, "AllocPerWorker[float32](workers=2, n=1)", "needs 256 bytes")
}

func TestBadArguments(t *testing.T) {
	a := mustNew(t, 4096, Options{})
	_, err := Alloc[float32](a, -1)
	wantErr(t, err, ErrBadSize, "Alloc[float32](n=-1)", "negative")
	_, err = Alloc[float32](a, math.MaxInt/4+1)
	wantErr(t, err, ErrBadSize, "overflows")
	_, err = Alloc[[1 << 20]byte](a, math.MaxInt/(1<<20)+2)
	wantErr(t, err, ErrBadSize, "overflows")
	for _, al := range []int{0, -8, 3, 48, MaxAlign * 2} {
		_, err = AllocAligned[byte](a, 1, al)
		wantErr(t, err, ErrBadAlign, "power of two")
	}
	_, err = AllocPerWorker[float32](a, 0, 4)
	wantErr(t, err, ErrBadSize, "workers=0")
	_, err = AllocPerWorker[float32](a, 1<<40, 1<<30)
	wantErr(t, err, ErrBadSize, "overflows")
	if a.Used() != 0 {
		t.Fatalf("refused requests used %d bytes", a.Used())
	}
	for _, size := range []int{0, -1, math.MaxInt, math.MaxInt - 100} {
		_, err = New(size, Options{})
		wantErr(t, err, ErrBadSize, "New(size=")
	}
	// Beyond the 128 TiB address space: the OS refuses, and the error says so.
	_, err = New(1<<50, Options{})
	wantErr(t, err, ErrMap, "New(size=1125899906842624)", mapCall)
	// Zero-length requests are fine and take nothing, even from a full arena.
	if _, err := Alloc[byte](a, 4095); err != nil {
		t.Fatal(err)
	}
	z, err := AllocAligned[float64](a, 0, 4096)
	if err != nil || len(z) != 0 || a.Used() != 4095 {
		t.Fatalf("Alloc 0: len %d, err %v, Used %d", len(z), err, a.Used())
	}
	ws, err := AllocPerWorker[struct{}](a, 3, 1000)
	if err != nil || len(ws) != 3 || len(ws[2]) != 1000 || a.Used() != 4095 {
		t.Fatalf("AllocPerWorker of a zero-size type: %v, Used %d", err, a.Used())
	}
}

func TestPointerTypesRefused(t *testing.T) {
	a := mustNew(t, 4096, Options{})
	type inner struct {
		x float32
		s string
	}
	type outer struct {
		n  int
		in [2]inner
	}
	cases := []struct {
		err   error
		names []string
	}{
		{second(Alloc[*int](a, 1)), []string{"*int", "ptr"}},
		{second(Alloc[[]float32](a, 1)), []string{"[]float32", "slice"}},
		{second(Alloc[string](a, 1)), []string{"string"}},
		{second(Alloc[map[int]int](a, 1)), []string{"map[int]int", "map"}},
		{second(Alloc[chan int](a, 1)), []string{"chan int", "chan"}},
		{second(Alloc[func()](a, 1)), []string{"func()", "func"}},
		{second(Alloc[any](a, 1)), []string{"interface"}},
		{second(Alloc[unsafe.Pointer](a, 1)), []string{"unsafe.Pointer"}},
		{second(Alloc[[4]*byte](a, 1)), []string{"[4]*uint8", "[i] is a ptr"}},
		{second(Alloc[outer](a, 1)), []string{"arena.outer", "outer.in[i].s is a string"}},
		{second(AllocPerWorker[inner](a, 2, 1)), []string{"arena.inner", "inner.s is a string"}},
	}
	for _, c := range cases {
		wantErr(t, c.err, ErrHasPointers, c.names...)
	}
	// Twice for the cached verdict.
	wantErr(t, second(Alloc[outer](a, 1)), ErrHasPointers, "outer.in[i].s")
	type block struct {
		d  uint16
		qs [32]int8
	}
	for i := 0; i < 2; i++ {
		if _, err := Alloc[block](a, 3); err != nil {
			t.Fatalf("pointer-free struct refused: %v", err)
		}
		if _, err := Alloc[[2]struct{ a, b uintptr }](a, 1); err != nil {
			t.Fatalf("uintptr array refused: %v", err)
		}
	}
	if a.Used() == 0 {
		t.Fatal("accepted allocations used nothing")
	}
}

func second[T any](_ T, err error) error { return err }

func TestCloseAndAfter(t *testing.T) {
	a, err := New(1<<16, Options{})
	if err != nil {
		t.Fatal(err)
	}
	Alloc[byte](a, 10)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !a.Closed() || a.Used() != 0 || a.Left() != 0 {
		t.Fatalf("closed arena: Closed %v Used %d Left %d", a.Closed(), a.Used(), a.Left())
	}
	_, err = Alloc[float32](a, 4)
	wantErr(t, err, ErrClosed, "Alloc[float32](n=4")
	_, err = AllocPerWorker[float32](a, 2, 4)
	wantErr(t, err, ErrClosed, "AllocPerWorker")
	_, err = a.HugeBacked()
	wantErr(t, err, ErrClosed)
}

func TestAllocZeroHeapAllocations(t *testing.T) {
	a := mustNew(t, 1<<20, Options{})
	type block struct {
		d  uint16
		qs [32]int8
	}
	Alloc[block](a, 1) // fills the type cache
	a.Reset(Mark{a: a})
	var sink float32
	n := testing.AllocsPerRun(200, func() {
		m := a.Mark()
		f, err := Alloc[float32](a, 256)
		if err != nil {
			panic(err)
		}
		b, err := AllocAligned[block](a, 7, 256)
		if err != nil {
			panic(err)
		}
		f[255] = float32(b[6].qs[31])
		sink += f[255]
		if err := a.Reset(m); err != nil {
			panic(err)
		}
	})
	if n != 0 {
		t.Fatalf("Alloc/AllocAligned/Mark/Reset: %v heap allocations per run, want 0", n)
	}
	_ = sink
}

func TestAllocPerWorker(t *testing.T) {
	a := mustNew(t, 1<<20, Options{})
	Alloc[byte](a, 3) // misalign the bump pointer first
	for _, n := range []int{1, 5, 32, 33, 100} {
		ws, err := AllocPerWorker[float32](a, 4, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 4 {
			t.Fatalf("%d slices, want 4", len(ws))
		}
		for w, s := range ws {
			if len(s) != n || cap(s) != n {
				t.Fatalf("n=%d worker %d: len/cap %d/%d", n, w, len(s), cap(s))
			}
			if addr(s)%WorkerAlign != 0 {
				t.Fatalf("n=%d worker %d starts at %#x, not on a %d-byte block", n, w, addr(s), WorkerAlign)
			}
			// Last byte's block must come before the next worker's first block.
			lastBlock := (addr(s) + uintptr(4*n) - 1) / WorkerAlign
			if w+1 < len(ws) && lastBlock >= addr(ws[w+1])/WorkerAlign {
				t.Fatalf("n=%d: workers %d and %d share block %d", n, w, w+1, lastBlock)
			}
		}
		// Nothing allocated next may land in the last worker's block.
		next, _ := Alloc[byte](a, 1)
		if last := ws[3]; addr(next)/WorkerAlign <= (addr(last)+uintptr(4*n)-1)/WorkerAlign {
			t.Fatalf("n=%d: next allocation at %#x shares the last worker's block", n, addr(next))
		}
	}
}

// Workers write and read only their own slice, concurrently; every value must survive.
// The race detector does not watch mmap'd memory (its shadow covers the Go heap and data
// only), so the values and the block layout (TestAllocPerWorker) are what is checked.
func TestPerWorkerConcurrentUse(t *testing.T) {
	a := mustNew(t, 1<<20, Options{})
	const workers, n, rounds = 4, 37, 2000
	ws, err := AllocPerWorker[uint64](a, workers, n)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range ws {
		wg.Add(1)
		go func(w int, s []uint64) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for i := range s {
					s[i] += uint64(w*1000 + i)
				}
			}
		}(w, ws[w])
	}
	wg.Wait()
	for w, s := range ws {
		for i, v := range s {
			if want := uint64(rounds * (w*1000 + i)); v != want {
				t.Fatalf("worker %d element %d = %d, want %d", w, i, v, want)
			}
		}
	}
}

func TestGuardNew(t *testing.T) {
	a := mustNew(t, 1000, Options{Guard: true})
	if a.Cap() != 1024 {
		t.Fatalf("Cap %d, want 1000 rounded up to 1024", a.Cap())
	}
	b, err := Alloc[byte](a, 1024)
	if err != nil {
		t.Fatal(err)
	}
	last := unsafe.Pointer(&b[len(b)-1])
	if _, faulted := faultAt(func() { poke(last) }); faulted {
		t.Fatal("writing the last byte of the arena faulted")
	}
	past := unsafe.Add(last, 1)
	at, faulted := faultAt(func() { poke(past) })
	if !faulted || at != uintptr(past) {
		t.Fatalf("one byte past the arena: faulted %v at %#x, want a fault at %#x", faulted, at, uintptr(past))
	}
	_, err = New(1000, Options{Guard: true, Pages: ForceHugeTLB})
	wantErr(t, err, ErrMap, "Guard", "MAP_HUGETLB")
}

func TestPageKindStrings(t *testing.T) {
	for k, want := range map[PageKind]string{Kind4K: "4k", KindTHP: "thp-madvise", KindHugeTLB: "hugetlb", 7: "PageKind(7)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), want)
		}
	}
	for p, want := range map[PagePolicy]string{Auto: "auto", ForceTHP: "thp", ForcePlain: "plain", ForceHugeTLB: "hugetlb"} {
		if !strings.Contains(p.String(), want) {
			t.Errorf("%d.String() = %q, want %q", int(p), p.String(), want)
		}
	}
}
