package arena

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

// q8Block is a Q8_0 block as ggml stores it: 34 bytes, 2-byte aligned.
type q8Block struct {
	D  uint16
	Qs [32]int8
}

// testPlan mixes regions, alignments, odd sizes and per-worker buffers, added out of
// region order.
func testPlan(guard bool) *Plan {
	p := &Plan{Guard: guard}
	p.Add(Buffer{Name: "x", ElemSize: 4, Count: 896, Region: Activations})
	p.Add(Buffer{Name: "wq", ElemSize: 34, Count: 896 * 28, Region: Weights})
	p.AddPerWorker("acc", 4, 37, 3, Scratch)
	p.Add(Buffer{Name: "kcache", ElemSize: 2, Count: 24 * 128 * 64, Align: 4096, Region: KV})
	p.Add(Buffer{Name: "wk", ElemSize: 34, Count: 128 * 28, Align: 2 << 20, Region: Weights})
	p.Add(Buffer{Name: "logits", ElemSize: 4, Count: 1001, Region: Activations})
	p.Add(Buffer{Name: "empty", ElemSize: 8, Count: 0, Region: Activations})
	p.AddPerWorker("qx", 34, 28, 2, Scratch)
	p.Add(Buffer{Name: "tmp", ElemSize: 1, Count: 4096, Align: 1, Region: Scratch})
	return p
}

func TestLayoutOrderAlignmentNoOverlap(t *testing.T) {
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprint("guard=", guard), func(t *testing.T) {
			l, err := testPlan(guard).Layout()
			if err != nil {
				t.Fatal(err)
			}
			wantOrder := []string{"wq", "wk", "x", "logits", "empty", "kcache", "acc", "qx", "tmp"}
			if len(l.Entries) != len(wantOrder) {
				t.Fatalf("%d entries, want %d", len(l.Entries), len(wantOrder))
			}
			end := 0
			for i, e := range l.Entries {
				if e.Name != wantOrder[i] {
					t.Fatalf("entry %d is %q, want %q", i, e.Name, wantOrder[i])
				}
				if i > 0 && e.Region < l.Entries[i-1].Region {
					t.Fatalf("%q (%v) after %q (%v): regions out of order", e.Name, e.Region, l.Entries[i-1].Name, l.Entries[i-1].Region)
				}
				if e.Offset%e.Align != 0 || e.Offset < end {
					t.Fatalf("%q at %d: align %d, previous buffer ends at %d", e.Name, e.Offset, e.Align, end)
				}
				want := e.ElemSize * e.Count
				if e.Workers > 0 {
					if e.Stride%WorkerAlign != 0 || e.Stride < want || e.Bytes != e.Stride*e.Workers || e.Align != WorkerAlign {
						t.Fatalf("%q: stride %d bytes %d align %d for %d workers x %d bytes", e.Name, e.Stride, e.Bytes, e.Align, e.Workers, want)
					}
				} else if e.Bytes != want {
					t.Fatalf("%q: %d bytes, want %d", e.Name, e.Bytes, want)
				}
				for _, g := range l.guards {
					if e.Offset < g+pageSize && g < e.Offset+e.Bytes {
						t.Fatalf("%q [%d, %d) overlaps the guard page at %d", e.Name, e.Offset, e.Offset+e.Bytes, g)
					}
				}
				end = e.Offset + e.Bytes
				got, ok := l.Lookup(e.Name)
				if !ok || got != e {
					t.Fatalf("Lookup(%q) = %+v, %v", e.Name, got, ok)
				}
			}
			if guard {
				if len(l.guards) != 4 || l.Total != l.guards[3]+pageSize {
					t.Fatalf("guards %v, Total %d", l.guards, l.Total)
				}
				// Each region's last buffer ends right against its guard, but for the padding
				// its own alignment forces (none when its size is a multiple of it).
				for _, s := range l.Regions {
					var last Entry
					for _, e := range l.Entries {
						if e.Region == s.Region {
							last = e
						}
					}
					gap := (last.Align - last.Bytes%last.Align) % last.Align
					if s.Offset+s.Bytes != last.Offset+last.Bytes || s.Guard != last.Offset+last.Bytes+gap {
						t.Fatalf("region %v [%d, %d), last buffer %q ends at %d (align %d), guard at %d",
							s.Region, s.Offset, s.Offset+s.Bytes, last.Name, last.Offset+last.Bytes, last.Align, s.Guard)
					}
				}
			} else if l.Total != end || len(l.guards) != 0 {
				t.Fatalf("Total %d, last buffer ends at %d, guards %v", l.Total, end, l.guards)
			}
			if _, ok := l.Lookup("nope"); ok {
				t.Fatal("Lookup of an unknown name succeeded")
			}
			// The exported copy is for reading only.
			l.Entries[0].Offset = 12345
			if e, _ := l.Lookup("wq"); e.Offset == 12345 {
				t.Fatal("changing Entries changed the layout")
			}
		})
	}
}

func TestLayoutErrors(t *testing.T) {
	cases := []struct {
		name      string
		build     func(p *Plan)
		fragments []string
	}{
		{"empty plan", func(p *Plan) {}, []string{"no buffers"}},
		{"duplicate", func(p *Plan) {
			p.Add(Buffer{Name: "a", ElemSize: 4, Count: 1})
			p.Add(Buffer{Name: "a", ElemSize: 4, Count: 2, Region: KV})
		}, []string{`"a"`, "twice"}},
		{"no name", func(p *Plan) { p.Add(Buffer{ElemSize: 4, Count: 1}) }, []string{"empty name"}},
		{"region", func(p *Plan) { p.Add(Buffer{Name: "r", ElemSize: 4, Count: 1, Region: 7}) }, []string{`"r"`, "Region(7)", "unknown region"}},
		{"elem", func(p *Plan) { p.Add(Buffer{Name: "e", ElemSize: 0, Count: 1}) }, []string{`"e"`, "element size"}},
		{"count", func(p *Plan) { p.Add(Buffer{Name: "c", ElemSize: 4, Count: -3}) }, []string{`"c"`, "count -3", "negative"}},
		{"align", func(p *Plan) { p.Add(Buffer{Name: "al", ElemSize: 4, Count: 1, Align: 96}) }, []string{`"al"`, "alignment 96"}},
		{"align big", func(p *Plan) { p.Add(Buffer{Name: "ab", ElemSize: 4, Count: 1, Align: MaxAlign * 2}) }, []string{"power of two"}},
		{"workers", func(p *Plan) { p.AddPerWorker("w", 4, 8, 0, Scratch) }, []string{`"w"`, "0 workers"}},
		{"overflow size", func(p *Plan) { p.Add(Buffer{Name: "o", ElemSize: 1 << 32, Count: 1 << 32}) }, []string{`"o"`, "overflows"}},
		{"overflow workers", func(p *Plan) { p.AddPerWorker("ow", 1<<20, 1<<20, 1<<30, Scratch) }, []string{`"ow"`, "overflows"}},
		{"overflow offsets", func(p *Plan) {
			p.Add(Buffer{Name: "big1", ElemSize: 1 << 31, Count: 1 << 31})
			p.Add(Buffer{Name: "big2", ElemSize: 1 << 31, Count: 1 << 31})
		}, []string{`"big2"`, "overflow"}},
		{"overflow across regions", func(p *Plan) {
			p.Add(Buffer{Name: "w", ElemSize: 1 << 31, Count: math.MaxInt >> 31})
			p.Add(Buffer{Name: "k", ElemSize: 1, Count: 1 << 32, Region: KV})
		}, []string{`"k"`, "overflow"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Plan{}
			c.build(p)
			l, err := p.Layout()
			if l != nil {
				t.Fatalf("got a layout: %+v", l.Entries)
			}
			wantErr(t, err, ErrPlan, c.fragments...)
		})
	}
}

// Every planned buffer, obtained from the mapped arena, sits at the planned offset and
// holds its own data: writing all of them and reading them back finds no overlap.
func TestPlanOffsetsMatchAllocation(t *testing.T) {
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprint("guard=", guard), func(t *testing.T) {
			l, err := testPlan(guard).Layout()
			if err != nil {
				t.Fatal(err)
			}
			a, err := NewFromLayout(l, Options{Guard: guard, Prefault: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			base := uintptr(a.base)
			if base%(2<<20) != 0 {
				t.Fatalf("base %#x not aligned for the 2 MiB buffer", base)
			}
			if a.Cap() != l.Total || a.Left() != 0 {
				t.Fatalf("Cap %d Left %d, want %d and 0", a.Cap(), a.Left(), l.Total)
			}
			at := func(name string, p uintptr) {
				t.Helper()
				e, _ := l.Lookup(name)
				if int(p-base) != e.Offset {
					t.Fatalf("%q at offset %d, planned %d", name, p-base, e.Offset)
				}
			}
			x := mustGet[float32](t, a, l, "x", 896)
			wq := mustGet[q8Block](t, a, l, "wq", 896*28)
			wk := mustGet[q8Block](t, a, l, "wk", 128*28)
			logits := mustGet[float32](t, a, l, "logits", 1001)
			kc := mustGet[uint16](t, a, l, "kcache", 24*128*64)
			tmp := mustGet[byte](t, a, l, "tmp", 4096)
			empty := mustGet[float64](t, a, l, "empty", 0)
			acc, err := GetPerWorker[float32](a, l, "acc")
			if err != nil {
				t.Fatal(err)
			}
			qx, err := GetPerWorker[q8Block](a, l, "qx")
			if err != nil {
				t.Fatal(err)
			}
			at("x", addr(x))
			at("wq", addr(wq))
			at("wk", addr(wk))
			at("logits", addr(logits))
			at("kcache", addr(kc))
			at("tmp", addr(tmp))
			at("empty", addr(empty))
			at("acc", addr(acc[0]))
			at("qx", addr(qx[0]))
			accE, _ := l.Lookup("acc")
			for w, s := range acc {
				if len(s) != 37 || cap(s) != 37 || int(addr(s)-base) != accE.Offset+w*accE.Stride {
					t.Fatalf("acc[%d]: len %d cap %d offset %d", w, len(s), cap(s), addr(s)-base)
				}
			}
			if len(qx) != 2 || len(qx[1]) != 28 {
				t.Fatalf("qx: %d workers, %d elements", len(qx), len(qx[1]))
			}

			// Write every byte of every buffer with its own tag, then read all back.
			type buf struct {
				name string
				b    []byte
			}
			var bufs []buf
			add := func(name string, b []byte) { bufs = append(bufs, buf{name, b}) }
			add("x", rawBytes(x))
			add("wq", rawBytes(wq))
			add("wk", rawBytes(wk))
			add("logits", rawBytes(logits))
			add("kcache", rawBytes(kc))
			add("tmp", tmp)
			for w := range acc {
				add(fmt.Sprint("acc", w), rawBytes(acc[w]))
			}
			for w := range qx {
				add(fmt.Sprint("qx", w), rawBytes(qx[w]))
			}
			for i, b := range bufs {
				for j := range b.b {
					b.b[j] = byte(i + 1)
				}
			}
			for i, b := range bufs {
				for j, v := range b.b {
					if v != byte(i+1) {
						t.Fatalf("%s[%d] = %d, want %d: another buffer overlaps it", b.name, j, v, i+1)
					}
				}
			}
			// Per-worker slices own whole 128-byte blocks.
			sort.Slice(bufs, func(i, j int) bool { return addr(bufs[i].b) < addr(bufs[j].b) })
			for i := 1; i < len(bufs); i++ {
				prev, cur := bufs[i-1], bufs[i]
				if strings.HasPrefix(prev.name, "acc") || strings.HasPrefix(prev.name, "qx") {
					if (addr(prev.b)+uintptr(len(prev.b))-1)/WorkerAlign >= addr(cur.b)/WorkerAlign {
						t.Fatalf("%s shares a 128-byte block with %s", prev.name, cur.name)
					}
				}
			}
		})
	}
}

// rawBytes views a slice's memory as bytes.
func rawBytes[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

func mustGet[T any](t *testing.T, a *Arena, l *Layout, name string, n int) []T {
	t.Helper()
	s, err := Get[T](a, l, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != n || cap(s) != n {
		t.Fatalf("Get(%q): len %d cap %d, want %d", name, len(s), cap(s), n)
	}
	return s
}

func TestGetErrors(t *testing.T) {
	l, err := testPlan(false).Layout()
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewFromLayout(l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = Get[float64](a, l, "x")
	wantErr(t, err, ErrType, `Get[float64]("x")`, "8 bytes", "plan says 4")
	_, err = Get[float32](a, l, "nope")
	wantErr(t, err, ErrNotFound, `"nope"`)
	_, err = Get[float32](a, l, "acc")
	wantErr(t, err, ErrType, "GetPerWorker")
	_, err = GetPerWorker[float32](a, l, "x")
	wantErr(t, err, ErrType, "use Get")
	_, err = Get[*float32](a, l, "wq")
	wantErr(t, err, ErrHasPointers, "*float32")
	_, err = Get[[2]uint32](a, l, "tmp") // 8-byte elements where 1 is planned
	wantErr(t, err, ErrType)
	// An 8-byte-aligned type over a 1-byte-aligned buffer at an odd offset.
	p := &Plan{}
	p.Add(Buffer{Name: "pad", ElemSize: 1, Count: 3, Align: 1})
	p.Add(Buffer{Name: "odd", ElemSize: 8, Count: 2, Align: 1})
	l2, _ := p.Layout()
	a2, err := NewFromLayout(l2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Get[uint64](a2, l2, "odd")
	wantErr(t, err, ErrType, "offset 3", "not aligned")
	_, err = Get[float32](a2, l, "x")
	wantErr(t, err, ErrPlan, "not made from this layout")
	a2.Close()
	_, err = Get[uint64](a2, l2, "odd")
	wantErr(t, err, ErrClosed)

	// The planned arena has nothing left for Alloc, and marks cannot dig into the plan.
	_, err = Alloc[float32](a, 1)
	wantErr(t, err, ErrExhausted, fmt.Sprintf("0 of %d bytes left", l.Total))
	if err := a.Reset(a.Mark()); err != nil || a.Used() != l.Total {
		t.Fatalf("Reset to the current mark: %v, Used %d", err, a.Used())
	}
	_, err = NewFromLayout(l, Options{Guard: true})
	wantErr(t, err, ErrPlan, "Guard=true", "Guard=false")
	_, err = NewFromLayout(nil, Options{})
	wantErr(t, err, ErrPlan)
	_, err = NewFromLayout(&Layout{}, Options{})
	wantErr(t, err, ErrPlan)
	p = &Plan{}
	p.Add(Buffer{Name: "none", ElemSize: 4, Count: 0})
	l3, err := p.Layout()
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewFromLayout(l3, Options{})
	wantErr(t, err, ErrPlan, "NewFromLayout(total=0)", "nothing to map")
}

func TestReportAndTable(t *testing.T) {
	l, err := testPlan(true).Layout()
	if err != nil {
		t.Fatal(err)
	}
	rows := l.Report()
	if len(rows) != len(l.Entries) {
		t.Fatalf("%d rows for %d entries", len(rows), len(l.Entries))
	}
	data := 0
	prevEnd := 0
	for i, r := range rows {
		e := l.Entries[i]
		if r.Name != e.Name || r.Region != e.Region || r.Offset != e.Offset || r.Bytes != e.Bytes ||
			r.Align != e.Align || r.Workers != e.Workers || r.Stride != e.Stride {
			t.Fatalf("row %d = %+v, entry %+v", i, r, e)
		}
		if r.Pad < 0 || (i > 0 && r.Region == rows[i-1].Region && r.Offset-r.Pad != prevEnd) {
			t.Fatalf("row %q: pad %d, previous end %d", r.Name, r.Pad, prevEnd)
		}
		prevEnd = r.Offset + r.Bytes
		data += r.Bytes
	}
	var buf bytes.Buffer
	if err := l.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, r := range rows {
		line := ""
		for _, ln := range strings.Split(out, "\n") {
			if f := strings.Fields(ln); len(f) > 2 && f[0] == r.Name {
				line = ln
			}
		}
		if line == "" {
			t.Fatalf("no table line for %q in\n%s", r.Name, out)
		}
		for _, want := range []string{r.Region.String(), fmt.Sprintf("%#x", r.Offset), fmt.Sprint(r.Bytes), fmt.Sprint(r.Align)} {
			if !strings.Contains(line, want) {
				t.Fatalf("line %q lacks %q", line, want)
			}
		}
	}
	want := fmt.Sprintf("total %d bytes", l.Total)
	if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("%d in buffers", data)) ||
		!strings.Contains(out, "4 guard pages") || !strings.Contains(out, "region weights") {
		t.Fatalf("table lacks totals (%q):\n%s", want, out)
	}
	t.Logf("\n%s", out)
}

// With Guard, one byte past each region's last buffer faults; its last byte does not.
func TestLayoutGuardFaults(t *testing.T) {
	p := &Plan{Guard: true}
	p.Add(Buffer{Name: "w", ElemSize: 34, Count: 32, Region: Weights}) // 1088 bytes: a multiple of 64
	p.Add(Buffer{Name: "act", ElemSize: 4, Count: 896, Region: Activations})
	p.Add(Buffer{Name: "kv", ElemSize: 2, Count: 5000, Align: 16, Region: KV})
	p.AddPerWorker("acc", 4, 32, 2, Scratch)
	l, err := p.Layout()
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewFromLayout(l, Options{Guard: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.PageKind() == KindHugeTLB {
		t.Fatal("a guarded arena must not use MAP_HUGETLB")
	}
	for _, e := range l.Entries {
		lastByte := unsafe.Add(a.base, e.Offset+e.Bytes-1)
		if _, faulted := faultAt(func() { poke(lastByte) }); faulted {
			t.Fatalf("%q: writing its last byte faulted", e.Name)
		}
		past := unsafe.Add(lastByte, 1)
		at, faulted := faultAt(func() { poke(past) })
		if !faulted || at != uintptr(past) {
			t.Fatalf("%q: one byte past the region: faulted %v at %#x, want %#x", e.Name, faulted, at, uintptr(past))
		}
	}
}

func TestRegionStrings(t *testing.T) {
	for r, want := range map[Region]string{Weights: "weights", Activations: "activations", KV: "kv", Scratch: "scratch", 9: "Region(9)"} {
		if r.String() != want {
			t.Errorf("Region %d = %q, want %q", int(r), r.String(), want)
		}
	}
}
