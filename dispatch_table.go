package kernelrt

import (
	"fmt"
	"strings"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The op list (ops.manifest + csrc/kernelrt.h) generates ops_gen.go: the Op constants, the
// argument packers, the Ops interface and every op as a package function, a Serial method
// and a Runtime method. See docs/ARCHITECTURE.md, "Adding an op".
//go:generate go run ./tools/opgen

// Op identifies one row of the dispatch table: one C kernel family. The constants (OpGemvQ8_0,
// ...) are generated from the op list in ops_gen.go.
type Op int

// NumOps is the number of rows in the dispatch table.
const NumOps = int(numOps)

// String returns the op's table name ("gemv_q8_0").
func (o Op) String() string {
	if o >= 0 && o < numOps {
		return kern.Names[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// ParseOp maps a table name ("gemv_q8_0", ...) to its Op.
func ParseOp(name string) (Op, error) {
	for i, n := range kern.Names {
		if n == name {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("kernelrt: unknown op %q (have %s)", name, strings.Join(kern.Names[:], ", "))
}

// Mode is the phase of inference a call belongs to; thresholds differ between them because
// decode calls are small and back to back while prefill calls are large.
type Mode int

const (
	// Decode is one token against the KV cache.
	Decode Mode = iota
	// Prefill is T prompt tokens at once.
	Prefill
	numModes
)

func (m Mode) String() string {
	if m == Prefill {
		return "prefill"
	}
	return "decode"
}

// modeOf is Prefill for calls of several tokens.
func modeOf(s Shape) Mode {
	if s.Tokens > 1 {
		return Prefill
	}
	return Decode
}

// SplitDim is the dimension an op's work is divided along between workers: a kernel's slice
// range (its last two C parameters) counts these units.
type SplitDim int

// Split dimensions.
const (
	SplitRows        SplitDim = iota // Shape.Rows
	SplitTokens                      // Shape.Tokens
	SplitHeads                       // Shape.Heads
	SplitElements                    // Shape.N
	SplitBlocks                      // Shape.N / 32 (quantized blocks)
	SplitSuperBlocks                 // Shape.N / 256 (K-quant super-blocks)
	SplitKVChunks                    // Shape.KVHeads * Shape.Chunks (decode attention: KV head x cache chunk)
	SplitKVTiles                     // Shape.KVHeads * ceil(Shape.Tokens / 16) (prefill attention: KV head x query tile)
)

func (d SplitDim) String() string {
	return [...]string{"rows", "tokens", "heads", "elements", "blocks", "super-blocks", "kv-chunks", "kv-tiles"}[d]
}

// units is how many units of d a call of shape s has.
func (d SplitDim) units(s Shape) int {
	switch d {
	case SplitRows:
		return s.Rows
	case SplitTokens:
		return s.Tokens
	case SplitHeads:
		return s.Heads
	case SplitBlocks:
		return s.N / QK
	case SplitSuperBlocks:
		return s.N / QKK
	case SplitKVChunks:
		return s.KVHeads * max(s.Chunks, 1)
	case SplitKVTiles:
		return s.KVHeads * ((s.Tokens + attnQTile - 1) / attnQTile)
	}
	return s.N
}

// Shape describes one call's sizes; each op reads the fields it needs.
type Shape struct {
	Rows, Cols, Tokens    int // GEMV/GEMM: rows x cols weights, Tokens activations
	Heads, KVHeads, HeadD int // attention and RoPE
	Ctx                   int // attention: cache positions attended (max over tokens)
	Chunks                int // decode attention: cache chunks per KV head (0 counts as 1)
	N                     int // elementwise ops and quantization: elements
}

// OpRow is one row of the dispatch table: everything the Runtime needs to decide whether a
// call is split, over how many workers, what each worker gets and which kernels run it.
type OpRow struct {
	Op Op
	// Split is the dimension divided between workers (the kernel's slice range).
	Split SplitDim
	// Granule is the smallest number of split units a worker gets (except the last), chosen
	// so that worker boundaries fall on whole 64-byte lines of output.
	Granule func(s Shape) int
	// Elements is the work measure MinElements is compared with (weights touched, floats
	// written, multiply-adds...).
	Elements func(s Shape) int
	// ThreadpoolSafe is false for ops whose kernel must not run split (stream_read: its
	// slice sums into one float); the Runtime runs such a row serially.
	ThreadpoolSafe bool
	// ScratchBytes is the private scratch every worker needs for a shape (nil: none); the
	// kernel's `scratch` parameter gets the caller's buffer on worker 0 and the Runtime's
	// per-worker arena buffer on the others.
	ScratchBytes func(s Shape) int
	// MinElements per mode: a worker must get at least this many elements for waking it to
	// pay. active = min(threads, units/granule, elements/MinElements).
	MinElements [numModes]int
	// Backend and SerialBackend are the kernel backends this op prefers when none is forced,
	// for calls split over the pool and for calls the caller runs alone. "" = the default
	// (asm); an absent backend falls back to the default set.
	Backend, SerialBackend string
	// Variant is the kernel variant this op prefers when none is forced ("avx2", "avx512"):
	// calibration records the one whose serial call was fastest on this CPU (an AVX-512
	// variant can lose to AVX2 where 512-bit instructions run as two halves). "" = the best
	// variant the CPU runs; one the CPU cannot run is ignored.
	Variant string
}

// Name is the op's table name.
func (r *OpRow) Name() string { return r.Op.String() }

// Units is how many units of the split dimension a call of shape s has.
func (r *OpRow) Units(s Shape) int { return r.Split.units(s) }

// lineGranule returns how many units of `unitFloats` float32s make a whole number of
// 64-byte lines (16 floats): 16/gcd(unitFloats, 16).
func lineGranule(unitFloats int) int {
	g := 16
	a, b := unitFloats, 16
	for b != 0 {
		a, b = b, a%b
	}
	if a > 0 {
		g = 16 / a
	}
	return g
}

// q8Bytes is the size of n/32 Q8_0 blocks.
func q8Bytes(n int) int { return n / QK * 34 }

// defaultTable is the built-in table. MinElements defaults come from measurements on a
// 2-core Zen 5 (see calibration/); calibrate.Run replaces them with this machine's numbers.
func defaultTable() [numOps]OpRow {
	weights := func(s Shape) int { return s.Rows * s.Cols }
	gemm := func(s Shape) int { return s.Rows * s.Cols * s.Tokens }
	elems := func(s Shape) int { return s.N }
	tokCols := func(s Shape) int { return s.Tokens * s.Cols }
	c16 := func(Shape) int { return 16 } // 16 float outputs = one line
	one := func(Shape) int { return 1 }
	colsLine := func(s Shape) int { return lineGranule(s.Cols) }
	fusedScratch := func(s Shape) int { return q8Bytes(s.Cols) }
	// Quantizers write blocks: a worker's range is whole 64-byte lines of them (32 Q8_0 blocks
	// of 34 bytes, 4 Q4_K super-blocks of 144...). Dequantizers write 32 or 256 floats a block:
	// every block is whole lines.
	quant := func(split SplitDim, blockBytes int) OpRow {
		g := blockLineGranule(blockBytes)
		return OpRow{Split: split, Granule: func(Shape) int { return g }, Elements: elems, MinElements: [numModes]int{1 << 16, 1 << 16}}
	}
	dequant := func(split SplitDim) OpRow {
		return OpRow{Split: split, Granule: one, Elements: elems, MinElements: [numModes]int{1 << 16, 1 << 16}}
	}
	gemv := OpRow{Split: SplitRows, Granule: c16, Elements: weights, MinElements: [numModes]int{32768, 32768}}
	gemmRow := OpRow{Split: SplitRows, Granule: c16, Elements: gemm, MinElements: [numModes]int{65536, 65536}}
	t := [numOps]OpRow{
		OpQuantizeQ8_0:     quant(SplitBlocks, 34),
		OpQuantizeQ5_0:     quant(SplitBlocks, 22),
		OpQuantizeQ4_0:     quant(SplitBlocks, 18),
		OpQuantizeQ4_1:     quant(SplitBlocks, 20),
		OpQuantizeQ5_1:     quant(SplitBlocks, 24),
		OpQuantizeQ4K:      quant(SplitSuperBlocks, 144),
		OpQuantizeQ5K:      quant(SplitSuperBlocks, 176),
		OpQuantizeQ6K:      quant(SplitSuperBlocks, 210),
		OpQuantizeQ8K:      quant(SplitSuperBlocks, 292),
		OpQuantizeIQ4_NL:   quant(SplitBlocks, 18),
		OpQuantizeQ2K:      quant(SplitSuperBlocks, 84),
		OpQuantizeIQ4_XS:   quant(SplitSuperBlocks, 136),
		OpQuantizeQ3K:      quant(SplitSuperBlocks, 110),
		OpDequantizeQ8_0:   dequant(SplitBlocks),
		OpDequantizeQ5_0:   dequant(SplitBlocks),
		OpDequantizeQ4_0:   dequant(SplitBlocks),
		OpDequantizeQ4_1:   dequant(SplitBlocks),
		OpDequantizeQ5_1:   dequant(SplitBlocks),
		OpDequantizeQ4K:    dequant(SplitSuperBlocks),
		OpDequantizeQ5K:    dequant(SplitSuperBlocks),
		OpDequantizeQ6K:    dequant(SplitSuperBlocks),
		OpDequantizeQ8K:    dequant(SplitSuperBlocks),
		OpDequantizeIQ4_NL: dequant(SplitBlocks),
		OpDequantizeQ2K:    dequant(SplitSuperBlocks),
		OpDequantizeIQ4_XS: dequant(SplitSuperBlocks),
		OpDequantizeQ3K:    dequant(SplitSuperBlocks),
		OpGemvQ8_0:         gemv,
		OpGemvQ5_0:         gemv,
		OpGemvQ4_0:         gemv,
		OpGemvQ5_1:         gemv,
		OpGemvQ4K:          gemv,
		OpGemvQ5K:          gemv,
		OpGemvQ6K:          gemv,
		OpGemvIQ4_NL:       gemv,
		OpGemvQ2K:          gemv,
		OpGemvIQ4_XS:       gemv,
		OpGemvQ3K:          gemv,
		OpGemvQ8_0F32: {Split: SplitRows, Granule: c16, Elements: weights, ScratchBytes: fusedScratch,
			MinElements: [numModes]int{32768, 32768}},
		OpGemvQ5_0F32: {Split: SplitRows, Granule: c16, Elements: weights, ScratchBytes: fusedScratch,
			MinElements: [numModes]int{32768, 32768}},
		OpGemvF32:    {Split: SplitRows, Granule: c16, Elements: weights, MinElements: [numModes]int{16384, 16384}},
		OpGemmQ8_0:   gemmRow,
		OpGemmQ5_0:   gemmRow,
		OpGemmQ4_0:   gemmRow,
		OpGemmQ5_1:   gemmRow,
		OpGemmQ4K:    gemmRow,
		OpGemmQ5K:    gemmRow,
		OpGemmQ6K:    gemmRow,
		OpGemmIQ4_NL: gemmRow,
		OpGemmQ2K:    gemmRow,
		OpGemmIQ4_XS: gemmRow,
		OpGemmQ3K:    gemmRow,
		OpRMSNorm:    {Split: SplitTokens, Granule: colsLine, Elements: tokCols, MinElements: [numModes]int{8192, 8192}},
		OpSoftmax: {Split: SplitRows, Granule: colsLine, Elements: func(s Shape) int { return s.Rows * s.Cols },
			MinElements: [numModes]int{8192, 8192}},
		OpSwiGLU: {Split: SplitElements, Granule: c16, Elements: elems, MinElements: [numModes]int{16384, 16384}},
		OpGeGLU:  {Split: SplitElements, Granule: c16, Elements: elems, MinElements: [numModes]int{16384, 16384}},
		OpAdd:    {Split: SplitElements, Granule: c16, Elements: elems, MinElements: [numModes]int{32768, 32768}},
		OpRopeNeoX: {Split: SplitTokens, Granule: func(s Shape) int { return lineGranule(s.Heads * s.HeadD) },
			Elements: func(s Shape) int { return s.Tokens * s.Heads * s.HeadD }, MinElements: [numModes]int{16384, 16384}},
		OpRopeNorm: {Split: SplitTokens, Granule: func(s Shape) int { return lineGranule(s.Heads * s.HeadD) },
			Elements: func(s Shape) int { return s.Tokens * s.Heads * s.HeadD }, MinElements: [numModes]int{16384, 16384}},
		OpKVAppend: {Split: SplitTokens, Granule: one, Elements: func(s Shape) int { return s.Tokens * s.KVHeads * s.HeadD },
			MinElements: [numModes]int{32768, 32768}},
		OpEmbedQ8_0: {Split: SplitTokens, Granule: colsLine, Elements: tokCols, MinElements: [numModes]int{16384, 16384}},
		// One float of output: never split.
		OpStreamRead: {Split: SplitElements, Granule: one, Elements: elems},
		// KV caches in F16 / Q8_0 and attention over F32 / F16 / Q8_0 caches (kernels_attn.go).
		// Decode splits KV head x cache chunk (the chunk rule picks the chunks), the merge of
		// chunked partial sums splits query heads, prefill splits KV head x 16-token query tile
		// in zigzag order (an even split balances the causal work). Work: multiply-adds.
		OpKVAppendF16: {Split: SplitTokens, Granule: one, Elements: func(s Shape) int { return s.Tokens * s.KVHeads * s.HeadD },
			MinElements: [numModes]int{32768, 32768}},
		OpKVAppendQ8_0: {Split: SplitTokens, Granule: one, Elements: func(s Shape) int { return s.Tokens * s.KVHeads * s.HeadD },
			MinElements: [numModes]int{16384, 16384}},
		OpAttnDecodeF32:  attnDecodeRow(),
		OpAttnDecodeF16:  attnDecodeRow(),
		OpAttnDecodeQ8_0: attnDecodeRow(),
		OpAttnMerge: {Split: SplitHeads, Granule: one, Elements: func(s Shape) int { return s.Heads * max(s.Chunks, 1) * s.HeadD },
			MinElements: [numModes]int{4096, 4096}},
		OpAttnPrefillF32:  attnPrefillRow(),
		OpAttnPrefillF16:  attnPrefillRow(),
		OpAttnPrefillQ8_0: attnPrefillRow(),
	}
	for i := range t {
		t[i].Op = Op(i)
		t[i].ThreadpoolSafe = Op(i) != OpStreamRead
	}
	// Pooled calls use asm (the default): a long cgo call parks its goroutine in syscall
	// state, the scheduler then spins up runtime threads looking for work, and with every
	// core pinned to a worker they steal time from the kernels (measured: the caller's share
	// of a pooled 9728x896 GEMV ran 30% slower under cgo than the same C as asm; 2-thread
	// decode 66 -> 78 tok/s, prefill 851 -> 1210). A call the caller runs alone leaves a
	// core free for those threads, so there gcc's faster code wins: single-thread Q8_0/Q5_0
	// GEMV streams 10-15% faster through cgo. Quantization is ~1 us and gcc's is faster.
	// Of the newer GEMVs only Q5_1's is clearly faster from gcc (one thread, 2048x2048 from
	// DRAM, three runs: cgo 18.3-20.9 GB/s, asm 16.4-17.3); Q4_0 and the K-quants were within
	// run-to-run noise of each other (+-10%), so they keep asm.
	t[OpQuantizeQ8_0].Backend = "cgo"
	for _, op := range []Op{OpQuantizeQ8_0, OpGemvQ8_0, OpGemvQ5_0, OpGemvQ5_1, OpGemvQ8_0F32, OpGemvQ5_0F32} {
		t[op].SerialBackend = "cgo"
	}
	return t
}

// attnDecodeRow is the row of the decode attention kernels: work = heads x positions x
// head size; each worker a private scratch.
func attnDecodeRow() OpRow {
	return OpRow{Split: SplitKVChunks, Granule: func(Shape) int { return 1 },
		Elements:     func(s Shape) int { return s.Heads * s.Ctx * s.HeadD },
		ScratchBytes: func(s Shape) int { return 4 * AttnScratchFloats(s.HeadD) }, MinElements: [numModes]int{16384, 16384}}
}

// attnPrefillRow is the row of the prefill attention kernels: work = the causal multiply-adds
// heads x head size x (tokens x (Ctx - tokens/2)), Ctx = pos0 + tokens.
func attnPrefillRow() OpRow {
	return OpRow{Split: SplitKVTiles, Granule: func(Shape) int { return 1 },
		Elements:     func(s Shape) int { return s.Heads * s.HeadD * s.Tokens * max(s.Ctx-s.Tokens/2, 1) },
		ScratchBytes: func(s Shape) int { return 4 * AttnScratchFloats(s.HeadD) }, MinElements: [numModes]int{16384, 16384}}
}

// Table returns a copy of the dispatch table rows in use by rt.
func (rt *Runtime) Table() []OpRow {
	out := make([]OpRow, numOps)
	copy(out, rt.table[:])
	return out
}

// plan is the decision for one call: how many workers and each one's range.
type plan struct {
	active  int
	units   int
	granule int
}

// decide applies the table: a row that is not ThreadpoolSafe runs serially; otherwise
// active = min(threads, granules, elements/MinElements[mode]), at least 1.
func (row *OpRow) decide(s Shape, mode Mode, threads int) plan {
	units := row.Split.units(s)
	g := row.Granule(s)
	if g < 1 {
		g = 1
	}
	p := plan{active: 1, units: units, granule: g}
	if !row.ThreadpoolSafe || threads <= 1 {
		return p
	}
	a := threads
	if ng := (units + g - 1) / g; ng < a {
		a = ng
	}
	if me := row.MinElements[mode]; me > 0 {
		if byWork := row.Elements(s) / me; byWork < a {
			a = byWork
		}
	}
	if a < 1 {
		a = 1
	}
	p.active = a
	return p
}

// share returns worker ith's half-open range [lo, hi) of n units split over nth workers,
// with every boundary on a multiple of granule so no output line is split between workers.
func share(n, granule, ith, nth int) (lo, hi int) {
	if granule < 1 {
		granule = 1
	}
	ng := (n + granule - 1) / granule
	q, r := ng/nth, ng%nth
	start := ith*q + min(ith, r)
	cnt := q
	if ith < r {
		cnt++
	}
	lo = min(start*granule, n)
	hi = min((start+cnt)*granule, n)
	return lo, hi
}

// SetMinElements overrides one row's thresholds (elements a worker must get for waking it to
// pay) in decode and prefill mode. Parity tests use it to force every active-worker count;
// calibration sets all rows from measurements. It must not race with calls on rt.
func (rt *Runtime) SetMinElements(op Op, decode, prefill int) error {
	if op < 0 || op >= numOps {
		return &OptionError{Option: "op", Value: fmt.Sprint(int(op)), Reason: "unknown op"}
	}
	if decode <= 0 || prefill <= 0 {
		return &OptionError{Option: "MinElements", Value: fmt.Sprintf("decode=%d prefill=%d", decode, prefill),
			Reason: fmt.Sprintf("thresholds of %s must be positive", op)}
	}
	rt.table[op].MinElements = [numModes]int{decode, prefill}
	return nil
}

// Decide reports how the table would run op on shape s in mode: the number of active
// workers and each worker's [lo, hi) range of split units. It runs nothing.
func (rt *Runtime) Decide(op Op, s Shape, mode Mode) (active int, ranges [][2]int) {
	p := rt.table[op].decide(s, mode, rt.threads)
	for w := 0; w < p.active; w++ {
		lo, hi := share(p.units, p.granule, w, p.active)
		ranges = append(ranges, [2]int{lo, hi})
	}
	return p.active, ranges
}
