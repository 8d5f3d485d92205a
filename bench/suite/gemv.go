package suite

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/bench/omp"
)

// gemvShape is one decode GEMV of the model.
type gemvShape struct {
	name       string
	rows, cols int
}

// gemvShapes returns the selected GEMV shapes of cfg in report order.
func (b *bench) gemvShapes() ([]gemvShape, error) {
	c := b.s.cfg
	qd, kd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	all := map[string]gemvShape{
		"q":       {"q", qd, c.Hidden},
		"k/v":     {"k/v", kd, c.Hidden},
		"o":       {"o", c.Hidden, qd},
		"gate+up": {"gate+up", 2 * c.Intermediate, c.Hidden},
		"gate":    {"gate", c.Intermediate, c.Hidden},
		"down":    {"down", c.Hidden, c.Intermediate},
		"logits":  {"logits", c.Vocab, c.Hidden},
	}
	want := map[string]bool{}
	for _, n := range b.s.GemvShapes {
		if _, ok := all[n]; !ok {
			return nil, fmt.Errorf("unknown GEMV shape %q (want one of %s)", n, strings.Join(allGemvShapes, ", "))
		}
		want[n] = true
	}
	var out []gemvShape
	for _, n := range allGemvShapes {
		if want[n] {
			out = append(out, all[n])
		}
	}
	return out, nil
}

// gemvType is one quantized weight type the GEMV sections run: its block layout, where its
// fp16 scales sit (filled with sane values, the rest of a block is random quants) and its
// GEMV, called with the activations its kernels take (Q8_0, or Q8_K for the K-quants).
type gemvType struct {
	name   string // ggml's name: "q4_K"
	bb, qk int    // bytes and weights per block
	k      bool   // Q8_K activations
	scales []int  // byte offsets of the block's fp16 scales (d, and m or dmin)
	op     kernelrt.Op
	call   func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error
}

// gemvActs are the quantized activations of one GEMV: Q8_0 for the types of 32, Q8_K else.
type gemvActs struct {
	q8 []kernelrt.BlockQ8_0
	k  []kernelrt.BlockQ8K
}

// blocksOf views w as blocks of B.
func blocksOf[B any](w []byte) []B {
	var z B
	return unsafe.Slice((*B)(unsafe.Pointer(unsafe.SliceData(w))), len(w)/int(unsafe.Sizeof(z)))
}

// gemvTypes are every weight type with a GEMV, in report order.
var gemvTypes = []*gemvType{
	{"q8_0", 34, 32, false, []int{0}, kernelrt.OpGemvQ8_0, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ8_0(y, blocksOf[kernelrt.BlockQ8_0](w), x.q8, rows, cols)
	}},
	{"q5_0", 22, 32, false, []int{0}, kernelrt.OpGemvQ5_0, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ5_0(y, blocksOf[kernelrt.BlockQ5_0](w), x.q8, rows, cols)
	}},
	{"q4_0", 18, 32, false, []int{0}, kernelrt.OpGemvQ4_0, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ4_0(y, blocksOf[kernelrt.BlockQ4_0](w), x.q8, rows, cols)
	}},
	{"q5_1", 24, 32, false, []int{0, 2}, kernelrt.OpGemvQ5_1, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ5_1(y, blocksOf[kernelrt.BlockQ5_1](w), x.q8, rows, cols)
	}},
	{"q4_K", 144, 256, true, []int{0, 2}, kernelrt.OpGemvQ4K, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ4K(y, blocksOf[kernelrt.BlockQ4K](w), x.k, rows, cols)
	}},
	{"q5_K", 176, 256, true, []int{0, 2}, kernelrt.OpGemvQ5K, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ5K(y, blocksOf[kernelrt.BlockQ5K](w), x.k, rows, cols)
	}},
	{"q6_K", 210, 256, true, []int{208}, kernelrt.OpGemvQ6K, func(e kernelrt.Ops, y []float32, w []byte, x gemvActs, rows, cols int) error {
		return e.GemvQ6K(y, blocksOf[kernelrt.BlockQ6K](w), x.k, rows, cols)
	}},
}

// gemvTypeNamed returns the type called name.
func gemvTypeNamed(name string) *gemvType {
	for _, t := range gemvTypes {
		if t.name == name {
			return t
		}
	}
	panic("bench: no GEMV type " + name)
}

// newActs quantizes cols activations as typ's GEMV takes them.
func newActs(typ *gemvType, xf []float32) (gemvActs, error) {
	if typ.k {
		x := make([]kernelrt.BlockQ8K, len(xf)/kernelrt.QKK)
		return gemvActs{k: x}, kernelrt.QuantizeQ8K(x, xf)
	}
	x := make([]kernelrt.BlockQ8_0, len(xf)/kernelrt.QK)
	return gemvActs{q8: x}, kernelrt.QuantizeQ8_0(x, xf)
}

// cut is the first cols values' worth of the activations.
func (x gemvActs) cut(cols int) gemvActs {
	if x.k != nil {
		return gemvActs{k: x.k[:cols/kernelrt.QKK]}
	}
	return gemvActs{q8: x.q8[:cols/kernelrt.QK]}
}

// weightPool is one arena of random quantized blocks of one type that every shape carves its
// rotation copies from: copy i of a shape is blocks [i*nb, (i+1)*nb).
type weightPool struct {
	a   *arena.Arena
	raw []byte
	bb  int // bytes per block
}

// copies is how many copies of an m-byte matrix rotate: enough to exceed rotate bytes.
func copies(m, rotate int) int { return max(1, (rotate+m-1)/m) }

// newWeightPool maps and fills a pool big enough for every shape's rotation in typ.
func (b *bench) newWeightPool(typ *gemvType, shapes []gemvShape, seed uint64) (*weightPool, error) {
	poolBytes := 0
	for _, sh := range shapes {
		m := sh.rows * sh.cols / typ.qk * typ.bb
		poolBytes = max(poolBytes, copies(m, b.s.RotateBytes)*m)
	}
	b.logf("gemv %s: filling %s of rotating weights", typ.name, mib(poolBytes))
	a, err := arena.New(poolBytes, arena.Options{Prefault: true})
	if err != nil {
		return nil, err
	}
	raw, err := arena.Alloc[byte](a, poolBytes)
	if err != nil {
		a.Close()
		return nil, err
	}
	fillBlocks(raw, typ, seed)
	b.arenaInfo("gemv weights "+typ.name, a)
	return &weightPool{a: a, raw: raw, bb: typ.bb}, nil
}

// fillBlocks writes random quants and sane fp16 scales (2^-11 .. 2^-10) into every block.
func fillBlocks(raw []byte, typ *gemvType, seed uint64) {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)/8)
	x := seed*0x9E3779B97F4A7C15 | 1
	for i := range words {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		words[i] = x
	}
	for off := 0; off+typ.bb <= len(raw); off += typ.bb {
		for _, so := range typ.scales {
			d := 0x1000 + uint16(raw[off+so+1]&7)<<7 // exponent 4: no Inf/NaN, realistic magnitude
			raw[off+so], raw[off+so+1] = byte(d), byte(d>>8)
		}
	}
}

func (p *weightPool) bytes(i, nb int) []byte { return p.raw[i*nb*p.bb : (i+1)*nb*p.bb] }

func randFloats(n int, seed uint64, scale float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]float32, n)
	for i := range out {
		out[i] = (2*r.Float32() - 1) * scale
	}
	return out
}

func (b *bench) gemv() error {
	shapes, err := b.gemvShapes()
	if err != nil {
		return err
	}
	s := &b.s
	g := &b.r.Gemv
	g.RotateBytes = s.RotateBytes
	g.Kernels, _ = b.rtN.KernelsFor(kernelrt.OpGemvQ8_0)
	g.OMP = omp.Available()
	g.OMPInfo = omp.Info()
	variant := g.Kernels[strings.IndexByte(g.Kernels, '/')+1:]
	ompVariant, verr := omp.ParseVariant(variant)
	if g.OMP && verr != nil {
		g.OMP = false
		g.OMPInfo = fmt.Sprintf("unavailable: %v", verr)
	}
	if g.OMP {
		g.OMPVariant = "krt_gemv_*_" + variant
		g.OMPInfo += fmt.Sprintf("; team threads pinned like the pool (thread i on core %v[i]), master = the pool's caller", b.rtN.Cores())
	} else {
		g.OMPVariant = "unavailable"
	}
	maxRows, maxCols := 0, 0
	for _, sh := range shapes {
		maxRows, maxCols = max(maxRows, sh.rows), max(maxCols, sh.cols)
	}
	xf := randFloats(maxCols, s.Seed, 1)
	x, err := newActs(gemvTypeNamed("q8_0"), xf)
	if err != nil {
		return err
	}
	xBytes := unsafe.Slice((*byte)(unsafe.Pointer(&x.q8[0])), len(x.q8)*34)
	y := make([]float32, maxRows)

	type key struct {
		typ   string
		shape string
		thr   int
	}
	rows := map[key]*GemvRow{}
	var order []key
	// The model's shapes run the types of Qwen2 files (the K-quants need cols % 256 == 0;
	// gemvByType runs every type on shapes that have it).
	for ti, name := range []string{"q8_0", "q5_0"} {
		gt := gemvTypeNamed(name)
		typ, bb := gt.name, gt.bb
		wp, err := b.newWeightPool(gt, shapes, s.Seed+uint64(ti)+7)
		if err != nil {
			return err
		}
		err = func() error {
			defer wp.a.Close()
			for _, sh := range shapes {
				nb := sh.rows * sh.cols / kernelrt.QK
				m := nb * bb
				nc := copies(m, s.RotateBytes)
				xs, ys := x.cut(sh.cols), y[:sh.rows]
				call := func(e kernelrt.Ops) func(i int) error {
					return func(i int) error { return gt.call(e, ys, wp.bytes(i%nc, nb), xs, sh.rows, sh.cols) }
				}
				var serial Timing
				if err := pinned(b.rt1, func() (err error) {
					serial, err = b.sample(3, call(kernelrt.Serial{}))
					return err
				}); err != nil {
					return err
				}
				for _, thr := range b.thr {
					rt := b.rt(thr)
					var t Timing
					if err := pinned(rt, func() (err error) {
						t, err = b.sample(3, call(rt))
						return err
					}); err != nil {
						return err
					}
					active, _ := rt.Decide(gt.op, kernelrt.Shape{Rows: sh.rows, Cols: sh.cols, Tokens: 1}, kernelrt.Decode)
					row := &GemvRow{Shape: sh.name, Rows: sh.rows, Cols: sh.cols, Type: typ, WeightBytes: m, Copies: nc,
						Threads: thr, Active: active, Ours: t, Serial: serial}
					row.GBs = float64(m) / (t.MedianUs * 1e3)
					row.PctBW = pct(row.GBs, b.r.Bandwidth.GBs(thr))
					row.Speedup = ratio(serial.MedianUs, t.MedianUs)
					if isQwen2_0_5B(s.cfg) {
						row.GGMLUs = ggmlUs(typ, sh.rows, sh.cols, thr)
						row.VsGGML = ratio(row.GGMLUs, t.MedianUs)
					}
					k := key{typ, sh.name, thr}
					rows[k] = row
					order = append(order, k)
					b.logf("gemv %-7s %-5s %6dx%-5d thr %d: %9.1f µs  %6.2f GB/s  %3.0f%% BW  x%.2f serial",
						sh.name, typ, sh.rows, sh.cols, thr, t.MedianUs, row.GBs, row.PctBW, row.Speedup)
				}
			}
			if !g.OMP {
				return nil
			}
			// The OpenMP peer runs after our measurements of this type, with its master on
			// the pool's caller core; libgomp's threads spin a while after each region, so
			// the pool is measured first and the spinners get time to sleep afterwards.
			// Run keeps this goroutine on one thread (one libgomp team); the team is created
			// before the master is pinned, since its threads inherit the master's affinity.
			defer time.Sleep(50 * time.Millisecond)
			omp.Warm(b.thr[len(b.thr)-1])
			return pinned(b.rtN, func() error {
				for _, thr := range b.thr {
					omp.SetThreads(thr)
					// Pinned like the pool: thread i on the pool's core i.
					if err := omp.Pin(b.rtN.Cores()[:thr]); err != nil {
						b.ompPinErr = err
					}
					for _, sh := range shapes {
						nb := sh.rows * sh.cols / kernelrt.QK
						m := nb * bb
						nc := copies(m, s.RotateBytes)
						chunk := (sh.rows + thr - 1) / thr
						chunk = (chunk + 15) &^ 15
						t, err := b.sample(3, func(i int) error {
							return omp.Gemv(bb == 22, ompVariant, y, wp.bytes(i%nc, nb), xBytes, sh.rows, sh.cols, chunk)
						})
						if err != nil {
							return err
						}
						row := rows[key{typ, sh.name, thr}]
						row.OMP = &t
						row.OMPGBs = float64(m) / (t.MedianUs * 1e3)
						row.VsOMP = ratio(t.MedianUs, row.Ours.MedianUs)
						b.logf("gemv %-7s %-5s %6dx%-5d thr %d: OpenMP %9.1f µs (ours %.2fx)", sh.name, typ, sh.rows, sh.cols, thr, t.MedianUs, row.VsOMP)
					}
				}
				return nil
			})
		}()
		if err != nil {
			return err
		}
	}
	for _, k := range order {
		g.Rows = append(g.Rows, *rows[k])
	}
	if b.ompPinErr != nil {
		g.OMPInfo += "; PINNING FAILED: " + b.ompPinErr.Error()
	}
	ours := map[shapeThr]float64{}
	for _, r := range g.Rows {
		if r.Type == "q8_0" {
			ours[shapeThr{r.Shape, r.Threads}] = r.Ours.MedianUs
		}
	}
	return b.gonum(shapes, ours)
}

// gemvByType runs every weight type's GEMV on one thread with each SIMD kernel variant the CPU
// has, weights streamed from DRAM, on shapes every type can hold (cols % 256 == 0: Qwen2's
// down projection and Llama shapes), as % of the same run's one-thread streaming read.
func (b *bench) gemvByType() error {
	s := &b.s
	g := &b.r.Gemv
	var variants []string
	for _, v := range kernelrt.Variants() {
		if v != "ref" {
			variants = append(variants, v)
		}
	}
	if len(variants) == 0 {
		// No SIMD variant (e.g. arm64 today): measure the kernels that do run here.
		variants = []string{"ref"}
	}
	var shapes []gemvShape
	maxRows, maxCols := 0, 0
	for _, sh := range s.TypeShapes {
		if sh[0] <= 0 || sh[1] <= 0 || sh[1]%kernelrt.QKK != 0 {
			return fmt.Errorf("type shape %dx%d: want positive rows and cols a multiple of %d", sh[0], sh[1], kernelrt.QKK)
		}
		shapes = append(shapes, gemvShape{fmt.Sprintf("%dx%d", sh[0], sh[1]), sh[0], sh[1]})
		maxRows, maxCols = max(maxRows, sh[0]), max(maxCols, sh[1])
	}
	rts := map[string]*kernelrt.Runtime{}
	defer func() {
		for _, rt := range rts {
			rt.Close()
		}
	}()
	for _, v := range variants {
		rt, err := kernelrt.New(kernelrt.Options{Threads: 1, Variant: v})
		if err != nil {
			return err
		}
		rts[v] = rt
	}
	bw := b.r.Bandwidth.GBs(1)
	g.TypesNote = fmt.Sprintf("one thread, each variant forced (Options.Variant), the op's serial kernels; %%BW = weight GB/s / "+
		"this run's 1-thread streaming read (%.2f GB/s)", bw)
	xf := randFloats(maxCols, s.Seed+5, 1)
	y := make([]float32, maxRows)
	for ti, typ := range gemvTypes {
		x, err := newActs(typ, xf)
		if err != nil {
			return err
		}
		wp, err := b.newWeightPool(typ, shapes, s.Seed+uint64(ti)+101)
		if err != nil {
			return err
		}
		err = func() error {
			defer wp.a.Close()
			for _, v := range variants {
				rt := rts[v]
				_, kernels := rt.KernelsFor(typ.op)
				for _, sh := range shapes {
					nb := sh.rows * sh.cols / typ.qk
					m := nb * typ.bb
					nc := copies(m, s.RotateBytes)
					xs, ys := x.cut(sh.cols), y[:sh.rows]
					var t Timing
					if err := pinned(rt, func() (err error) {
						t, err = b.sample(3, func(i int) error { return typ.call(rt, ys, wp.bytes(i%nc, nb), xs, sh.rows, sh.cols) })
						return err
					}); err != nil {
						return err
					}
					row := GemvTypeRow{Type: typ.name, Variant: v, Kernels: kernels, Shape: sh.name, Rows: sh.rows, Cols: sh.cols,
						WeightBytes: m, Copies: nc, Timing: t}
					row.GBs = float64(m) / (t.MedianUs * 1e3)
					row.PctBW = pct(row.GBs, bw)
					g.Types = append(g.Types, row)
					b.logf("gemv %-5s %-6s %-10s %6dx%-5d: %9.1f µs  %6.2f GB/s  %3.0f%% BW", typ.name, v, kernels, sh.rows, sh.cols,
						t.MedianUs, row.GBs, row.PctBW)
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// shapeThr keys our Q8_0 GEMV times for the gonum comparison.
type shapeThr struct {
	shape string
	thr   int
}

// gonumTask runs blas32 Sgemv on a line-aligned share of the rows.
type gonumTask struct {
	w, x, y    []float32
	rows, cols int
}

func (t *gonumTask) Run(ith, nth int) {
	lo := (t.rows * ith / nth) &^ 15
	hi := (t.rows * (ith + 1) / nth) &^ 15
	if ith == nth-1 {
		hi = t.rows
	}
	if hi <= lo {
		return
	}
	a := blas32.General{Rows: hi - lo, Cols: t.cols, Stride: t.cols, Data: t.w[lo*t.cols : hi*t.cols]}
	blas32.Gemv(blas.NoTrans, 1, a, blas32.Vector{N: t.cols, Inc: 1, Data: t.x}, 0, blas32.Vector{N: hi - lo, Inc: 1, Data: t.y[lo:hi]})
}

// gonum runs gonum's FP32 Sgemv on the shapes up to GonumMaxWeights weights, 1 goroutine
// and split over the pool.
func (b *bench) gonum(shapes []gemvShape, ours map[shapeThr]float64) error {
	s := &b.s
	g := &b.r.Gemv
	var keep, skipped []string
	var sel []gemvShape
	poolBytes := 0
	for _, sh := range shapes {
		if sh.rows*sh.cols > s.GonumMaxWeights {
			skipped = append(skipped, fmt.Sprintf("%s %dx%d", sh.name, sh.rows, sh.cols))
			continue
		}
		sel = append(sel, sh)
		keep = append(keep, sh.name)
		m := sh.rows * sh.cols * 4
		poolBytes = max(poolBytes, copies(m, s.RotateBytes)*m)
	}
	g.GonumNote = fmt.Sprintf("gonum's pure-Go Sgemv, one goroutine, or row blocks split over the pool; weights rotated like ours; "+
		"only shapes up to %d weights, FP32 is too slow beyond", s.GonumMaxWeights)
	if len(skipped) > 0 {
		g.GonumNote += "; skipped: " + strings.Join(skipped, ", ")
	}
	if len(sel) == 0 {
		return nil
	}
	a, err := arena.New(poolBytes, arena.Options{Prefault: true})
	if err != nil {
		return err
	}
	defer a.Close()
	w, err := arena.Alloc[float32](a, poolBytes/4)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(s.Seed, 99))
	for i := range w {
		w[i] = (r.Float32() - 0.5) * 0.04
	}
	b.arenaInfo("gonum fp32 weights", a)
	maxRows, maxCols := 0, 0
	for _, sh := range sel {
		maxRows, maxCols = max(maxRows, sh.rows), max(maxCols, sh.cols)
	}
	x := randFloats(maxCols, s.Seed+3, 1)
	y := make([]float32, maxRows)
	for _, sh := range sel {
		m := sh.rows * sh.cols
		nc := copies(m*4, s.RotateBytes)
		for _, thr := range b.thr {
			rt := b.rt(thr)
			task := &gonumTask{x: x[:sh.cols], y: y[:sh.rows], rows: sh.rows, cols: sh.cols}
			var t Timing
			err := pinned(rt, func() (err error) {
				t, err = b.sample(2, func(i int) error {
					task.w = w[(i%nc)*m : (i%nc+1)*m]
					if thr == 1 {
						task.Run(0, 1)
					} else {
						b.pool.Dispatch(task)
					}
					return nil
				})
				return err
			})
			if err != nil {
				return err
			}
			row := GonumRow{Shape: sh.name, Rows: sh.rows, Cols: sh.cols, Threads: thr, WeightBytes: m * 4, Timing: t,
				GBs: float64(m*4) / (t.MedianUs * 1e3), OursQ8Us: ours[shapeThr{sh.name, thr}]}
			row.VsOurs = ratio(t.MedianUs, row.OursQ8Us)
			g.Gonum = append(g.Gonum, row)
			b.logf("gonum   %-7s fp32  %6dx%-5d thr %d: %9.1f µs  %6.2f GB/s", sh.name, sh.rows, sh.cols, thr, t.MedianUs, row.GBs)
		}
	}
	runtime.KeepAlive(w)
	return nil
}
