package arena

import (
	"fmt"
	"io"
	"text/tabwriter"
	"unsafe"
)

// Region groups planned buffers; a layout puts all weights first, then activations, KV
// cache and scratch, so huge pages cover the weights contiguously and each kind of memory
// is one range the report (and a guard page) can name.
type Region int

const (
	// Weights: model parameters (repacked or converted copies; file-backed weights use MapFile).
	Weights Region = iota
	// Activations: per-token tensors passed between ops.
	Activations
	// KV: the attention key/value cache.
	KV
	// Scratch: per-op and per-worker temporaries.
	Scratch
	numRegions
)

// String returns "weights", "activations", "kv" or "scratch".
func (r Region) String() string {
	switch r {
	case Weights:
		return "weights"
	case Activations:
		return "activations"
	case KV:
		return "kv"
	case Scratch:
		return "scratch"
	}
	return fmt.Sprintf("Region(%d)", int(r))
}

// Buffer is one named buffer of a plan: Count elements of ElemSize bytes, aligned to Align
// (0 means DefaultAlign), in Region.
type Buffer struct {
	Name     string
	ElemSize int
	Count    int
	Align    int
	Region   Region
}

// Plan lists the buffers to lay out. Add and AddPerWorker only record; every check
// (names, sizes, alignments, overflow) happens in Layout, whose error names the buffer.
type Plan struct {
	// Guard lays out a PROT_NONE page after each region; arenas made from the layout must
	// then use Options.Guard too.
	Guard bool
	bufs  []planBuf
}

type planBuf struct {
	Buffer
	workers   int
	perWorker bool
}

// Add records a buffer.
func (p *Plan) Add(b Buffer) { p.bufs = append(p.bufs, planBuf{Buffer: b}) }

// AddPerWorker records workers slices of count elements each; every slice starts on its
// own WorkerAlign (128-byte) block and is padded to whole blocks, as AllocPerWorker does.
func (p *Plan) AddPerWorker(name string, elemSize, count, workers int, region Region) {
	b := Buffer{Name: name, ElemSize: elemSize, Count: count, Align: WorkerAlign, Region: region}
	p.bufs = append(p.bufs, planBuf{Buffer: b, workers: workers, perWorker: true})
}

// Entry is one laid-out buffer.
type Entry struct {
	Name   string
	Region Region
	// Offset is from the arena base; it is a multiple of Align.
	Offset int
	// Bytes is the span: ElemSize*Count, or Stride*Workers for a per-worker buffer.
	Bytes    int
	Align    int
	ElemSize int
	// Count is the number of elements (per worker, for a per-worker buffer).
	Count int
	// Workers is the number of per-worker slices, 0 for an ordinary buffer.
	Workers int
	// Stride is the distance between per-worker slices (a multiple of WorkerAlign).
	Stride int
}

// RegionSpan is the range a region's buffers occupy.
type RegionSpan struct {
	Region Region
	Offset int // first buffer
	Bytes  int // up to the end of the last buffer
	Guard  int // offset of the guard page after it, -1 without Guard
}

// Layout is a plan with every offset fixed. The exported fields are copies for reading;
// changing them does not change what NewFromLayout maps or what Get returns.
type Layout struct {
	Entries []Entry      // in layout order: by region, then in the order added
	Regions []RegionSpan // non-empty regions in layout order
	Total   int          // bytes NewFromLayout maps (before rounding to pages), guard pages included
	Guard   bool         // whether guard pages are laid out

	entries   []Entry
	index     map[string]int
	guards    []int // guard page offsets
	total     int
	baseAlign int // the mapping base must be aligned to this
	guard     bool
}

// Layout computes every offset and the total without mapping anything, so a later
// NewFromLayout can only fail in mmap itself.
func (p *Plan) Layout() (*Layout, error) {
	l := &Layout{index: make(map[string]int, len(p.bufs)), baseAlign: pageSize, guard: p.Guard}
	// Validate and size every buffer, in plan order, so errors come in the order added.
	sized := make([]Entry, len(p.bufs))
	for i, b := range p.bufs {
		e, err := sizeBuffer(b)
		if err != nil {
			return nil, err
		}
		if _, dup := l.index[b.Name]; dup {
			return nil, fmt.Errorf("arena: Plan.Layout: buffer %q is added twice: %w", b.Name, ErrPlan)
		}
		l.index[b.Name] = -1
		sized[i] = e
		l.baseAlign = max(l.baseAlign, e.Align)
	}
	if len(sized) == 0 {
		return nil, fmt.Errorf("arena: Plan.Layout: the plan has no buffers: %w", ErrPlan)
	}
	off := 0
	for r := Weights; r < numRegions; r++ {
		var in []Entry
		maxA := 1
		for _, e := range sized {
			if e.Region == r {
				in = append(in, e)
				maxA = max(maxA, e.Align)
			}
		}
		if len(in) == 0 {
			continue
		}
		var guardAt int
		var err error
		if off, guardAt, err = placeRegion(in, off, maxA, p.Guard); err != nil {
			return nil, err
		}
		for _, e := range in {
			l.index[e.Name] = len(l.entries)
			l.entries = append(l.entries, e)
		}
		if guardAt >= 0 {
			l.guards = append(l.guards, guardAt)
		}
		last := in[len(in)-1]
		l.Regions = append(l.Regions, RegionSpan{Region: in[0].Region, Offset: in[0].Offset,
			Bytes: last.Offset + last.Bytes - in[0].Offset, Guard: guardAt})
	}
	l.total = off
	l.Entries = append([]Entry(nil), l.entries...)
	l.Total, l.Guard = l.total, l.guard
	return l, nil
}

// placeRegion sets the offsets of one region's buffers (maxA is their largest alignment),
// starting at or after off, and returns where the next region may start and the guard page
// offset (-1 without guard). Without guard the buffers follow each other. With guard they
// are placed backwards from a guard page, each as late as its alignment allows, so one
// byte past the last buffer is the guard page whenever its size is a multiple of its
// alignment (otherwise less than one alignment unit of padding lies in between).
func placeRegion(in []Entry, off, maxA int, guard bool) (next, guardAt int, err error) {
	if !guard {
		for i := range in {
			start, ok := alignUpOK(off, in[i].Align)
			if ok {
				off, ok = addOK(start, in[i].Bytes)
			}
			if !ok {
				return 0, 0, layoutOverflow(in[i])
			}
			in[i].Offset = start
		}
		return off, -1, nil
	}
	// dist[i] = how far below the guard page buffer i starts.
	dist := make([]int, len(in))
	d := 0
	for i := len(in) - 1; i >= 0; i-- {
		var ok bool
		if d, ok = addOK(d, in[i].Bytes); ok {
			d, ok = alignUpOK(d, in[i].Align)
		}
		if !ok {
			return 0, 0, layoutOverflow(in[i])
		}
		dist[i] = d
	}
	// The guard page sits on a multiple of every alignment in the region, so each start
	// (guard - dist[i], dist[i] a multiple of Align) stays aligned.
	g, ok := addOK(off, d)
	if ok {
		g, ok = alignUpOK(g, max(maxA, pageSize))
	}
	if ok {
		next, ok = addOK(g, pageSize)
	}
	if !ok {
		return 0, 0, layoutOverflow(in[len(in)-1])
	}
	for i := range in {
		in[i].Offset = g - dist[i]
	}
	return next, g, nil
}

// sizeBuffer checks one buffer and fills in Align, Bytes, Workers and Stride.
func sizeBuffer(b planBuf) (Entry, error) {
	fail := func(format string, args ...any) (Entry, error) {
		return Entry{}, fmt.Errorf("arena: Plan.Layout: buffer %q (region %s, elem %d bytes, count %d): %s: %w",
			b.Name, b.Region, b.ElemSize, b.Count, fmt.Sprintf(format, args...), ErrPlan)
	}
	switch {
	case b.Name == "":
		return fail("empty name")
	case b.Region < Weights || b.Region >= numRegions:
		return fail("unknown region")
	case b.ElemSize <= 0:
		return fail("element size must be positive")
	case b.Count < 0:
		return fail("negative count")
	case b.perWorker && b.workers < 1:
		return fail("%d workers, need at least 1", b.workers)
	}
	e := Entry{Name: b.Name, Region: b.Region, Align: b.Align, ElemSize: b.ElemSize, Count: b.Count}
	if e.Align == 0 {
		e.Align = DefaultAlign
	}
	if !isPow2(e.Align) || e.Align > MaxAlign {
		return fail("alignment %d is not a power of two in [1, %d]", b.Align, MaxAlign)
	}
	var ok bool
	if b.perWorker {
		e.Workers = b.workers
		e.Stride, e.Bytes, ok = workerStride(b.Count, b.ElemSize, b.workers)
	} else {
		e.Bytes, ok = mulOK(b.Count, b.ElemSize)
	}
	if !ok {
		return fail("size overflows")
	}
	return e, nil
}

func layoutOverflow(e Entry) error {
	return fmt.Errorf("arena: Plan.Layout: buffer %q (region %s, %d bytes): offsets overflow: %w",
		e.Name, e.Region, e.Bytes, ErrPlan)
}

// Lookup returns the entry named name.
func (l *Layout) Lookup(name string) (Entry, bool) {
	i, ok := l.index[name]
	if !ok {
		return Entry{}, false
	}
	return l.entries[i], true
}

// NewFromLayout maps exactly the layout (its Total rounded up to pages, guard pages
// protected) following opts; opts.Guard must match the plan's Guard. All of the arena is
// taken by the planned buffers: Get and GetPerWorker return them, Alloc finds nothing left.
func NewFromLayout(l *Layout, opts Options) (*Arena, error) {
	if l == nil || l.index == nil {
		return nil, fmt.Errorf("arena: NewFromLayout: nil or zero Layout (use Plan.Layout): %w", ErrPlan)
	}
	what := fmt.Sprintf("NewFromLayout(total=%d)", l.total)
	if opts.Guard != l.guard {
		return nil, fmt.Errorf("arena: %s: Options.Guard=%v but the plan was laid out with Guard=%v: %w",
			what, opts.Guard, l.guard, ErrPlan)
	}
	if l.total == 0 {
		return nil, fmt.Errorf("arena: %s: every planned buffer is empty, nothing to map: %w", what, ErrPlan)
	}
	length, ok := alignUpOK(l.total, pageSize)
	if !ok {
		return nil, fmt.Errorf("arena: %s: size overflows when rounded up to pages: %w", what, ErrBadSize)
	}
	m, err := mapAnon(what, length, l.baseAlign, l.guards, opts)
	if err != nil {
		return nil, err
	}
	a := &Arena{off: l.total, hwm: l.total, base: m.base, cap: l.total, m: m, noZero: opts.NoZero, layout: l}
	return a, nil
}

// Get returns the planned buffer name of the arena made from l. T must be pointer-free and
// exactly ElemSize bytes. The slice has cap == len.
func Get[T any](a *Arena, l *Layout, name string) ([]T, error) {
	e, err := plannedEntry[T](a, l, name, "Get", false)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*T)(unsafe.Add(a.base, e.Offset)), e.Count), nil
}

// GetPerWorker returns the slices of a per-worker buffer (see Plan.AddPerWorker).
func GetPerWorker[T any](a *Arena, l *Layout, name string) ([][]T, error) {
	e, err := plannedEntry[T](a, l, name, "GetPerWorker", true)
	if err != nil {
		return nil, err
	}
	out := make([][]T, e.Workers)
	for w := range out {
		out[w] = unsafe.Slice((*T)(unsafe.Add(a.base, e.Offset+w*e.Stride)), e.Count)
	}
	return out, nil
}

// plannedEntry checks a Get/GetPerWorker request and returns the entry.
func plannedEntry[T any](a *Arena, l *Layout, name, op string, perWorker bool) (Entry, error) {
	var z T
	fail := func(format string, args ...any) (Entry, error) {
		return Entry{}, fmt.Errorf("arena: %s[%s](%q): %w", op, typeName[T](), name, fmt.Errorf(format, args...))
	}
	if a == nil || l == nil || a.layout != l {
		return fail("the arena was not made from this layout (NewFromLayout): %w", ErrPlan)
	}
	if a.Closed() {
		return fail("%w", ErrClosed)
	}
	e, ok := l.Lookup(name)
	if !ok {
		return fail("%w", ErrNotFound)
	}
	if err := pointerFree[T](); err != nil {
		return fail("%w", err)
	}
	if (e.Workers > 0) != perWorker {
		other := "Get"
		if e.Workers > 0 {
			other = "GetPerWorker"
		}
		return fail("buffer has %d workers: use %s: %w", e.Workers, other, ErrType)
	}
	if int(unsafe.Sizeof(z)) != e.ElemSize {
		return fail("element is %d bytes, the plan says %d: %w", unsafe.Sizeof(z), e.ElemSize, ErrType)
	}
	if (uintptr(a.base)+uintptr(e.Offset))%unsafe.Alignof(z) != 0 {
		return fail("offset %d is not aligned for the type (align %d; plan align %d): %w",
			e.Offset, unsafe.Alignof(z), e.Align, ErrType)
	}
	return e, nil
}

// ReportRow is one line of the layout report.
type ReportRow struct {
	Name    string
	Region  Region
	Offset  int
	Bytes   int
	Align   int
	Workers int // 0 for an ordinary buffer
	Stride  int // per-worker stride
	Pad     int // bytes between the previous buffer (or guard page) and this one
}

// Report returns one row per buffer, in layout order.
func (l *Layout) Report() []ReportRow {
	rows := make([]ReportRow, len(l.entries))
	prevEnd, g := 0, 0
	for i, e := range l.entries {
		for g < len(l.guards) && l.guards[g] < e.Offset {
			prevEnd = l.guards[g] + pageSize
			g++
		}
		rows[i] = ReportRow{Name: e.Name, Region: e.Region, Offset: e.Offset, Bytes: e.Bytes, Align: e.Align,
			Workers: e.Workers, Stride: e.Stride, Pad: e.Offset - prevEnd}
		prevEnd = e.Offset + e.Bytes
	}
	return rows
}

// WriteTable prints the report as a table (name, region, offset, bytes, alignment, workers,
// padding), then one line per region and the total.
func (l *Layout) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "name\tregion\toffset\tbytes\tsize\talign\tworkers\tpad\t")
	data := 0
	for _, r := range l.Report() {
		workers := ""
		if r.Workers > 0 {
			workers = fmt.Sprintf("%dx%d", r.Workers, r.Stride)
		}
		fmt.Fprintf(tw, "%s\t%s\t%#x\t%d\t%s\t%d\t%s\t%d\t\n",
			r.Name, r.Region, r.Offset, r.Bytes, humanBytes(r.Bytes), r.Align, workers, r.Pad)
		data += r.Bytes
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range l.Regions {
		guard := ""
		if s.Guard >= 0 {
			guard = fmt.Sprintf(", guard page at %#x", s.Guard)
		}
		if _, err := fmt.Fprintf(w, "region %-11s %#x..%#x  %d bytes (%s)%s\n",
			s.Region, s.Offset, s.Offset+s.Bytes, s.Bytes, humanBytes(s.Bytes), guard); err != nil {
			return err
		}
	}
	guards := len(l.guards) * pageSize
	_, err := fmt.Fprintf(w, "total %d bytes (%s): %d in buffers, %d padding, %d in %d guard pages\n",
		l.total, humanBytes(l.total), data, l.total-data-guards, guards, len(l.guards))
	return err
}

// humanBytes formats n in B, KiB, MiB or GiB.
func humanBytes(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
