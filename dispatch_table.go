package kernelrt

import (
	"fmt"
	"strings"
)

// Op identifies one row of the dispatch table.
type Op int

// The ops of the table, one per kernel family the Runtime dispatches.
const (
	OpQuantizeQ8_0 Op = iota
	OpGemvQ8_0
	OpGemvQ5_0
	OpGemvQ8_0F32
	OpGemvQ5_0F32
	OpGemvF32
	OpGemmQ8_0
	OpGemmQ5_0
	OpRMSNorm
	OpSoftmax
	OpSwiGLU
	OpAdd
	OpRope
	OpKVAppend
	OpAttention
	OpEmbed
	numOps
)

// NumOps is the number of rows in the dispatch table.
const NumOps = int(numOps)

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

// SplitDim is the dimension an op's work is divided along between workers.
type SplitDim int

// Split dimensions.
const (
	SplitRows SplitDim = iota
	SplitTokens
	SplitHeads
	SplitElements
	SplitBlocks
)

func (d SplitDim) String() string {
	return [...]string{"rows", "tokens", "heads", "elements", "blocks"}[d]
}

// Shape describes one call's sizes; each op reads the fields it needs.
type Shape struct {
	Rows, Cols, Tokens    int // GEMV/GEMM: rows x cols weights, Tokens activations
	Heads, KVHeads, HeadD int // attention and RoPE
	Ctx                   int // attention: cache positions attended (max over tokens)
	N                     int // elementwise ops: elements
}

// OpRow is one row of the dispatch table: everything the Runtime needs to know to decide
// serial or parallel, how many workers, and what each worker gets.
type OpRow struct {
	Op   Op
	Name string
	// Split is the dimension divided between workers; Units gives its size for a shape.
	Split SplitDim
	Units func(s Shape) int
	// Granule is the smallest number of split units a worker gets (except the last), chosen
	// so that worker boundaries fall on whole 64-byte lines of output.
	Granule func(s Shape) int
	// Elements is the work measure MinElements is compared with (weights touched, floats
	// written, multiply-adds...).
	Elements func(s Shape) int
	// ThreadpoolSafe is false for ops whose kernel must not run split (none today, but the
	// Runtime honours it: such a row always runs serially).
	ThreadpoolSafe bool
	// NeedsPrivateScratch says every worker needs its own scratch of ScratchBytes(shape).
	NeedsPrivateScratch bool
	ScratchBytes        func(s Shape) int
	// MinElements per mode: a worker must get at least this many elements for waking it to
	// pay. active = min(threads, units/granule, elements/MinElements).
	MinElements [numModes]int
	// MemoryBound says the op's time is streaming weights from DRAM (the GEMVs): a worker's
	// share must then also take CalibrationMinShareNs before splitting pays.
	MemoryBound bool
	// Backend and SerialBackend are the kernel backends this op prefers when none is forced,
	// for calls split over the pool and for calls the caller runs alone. "" = the default
	// (asm); an absent backend falls back to the default set.
	Backend, SerialBackend string
}

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

func one(Shape) int  { return 1 }
func none(Shape) int { return 0 }

// q8Bytes is the size of n/32 Q8_0 blocks.
func q8Bytes(n int) int { return n / QK * 34 }

// defaultTable is the built-in table. MinElements defaults come from measurements on a
// 2-core Zen 5 (see calibration/); Calibrate replaces them with this machine's numbers.
func defaultTable() [numOps]OpRow {
	rows := func(s Shape) int { return s.Rows }
	tokens := func(s Shape) int { return s.Tokens }
	heads := func(s Shape) int { return s.Heads }
	elems := func(s Shape) int { return s.N }
	weights := func(s Shape) int { return s.Rows * s.Cols }
	rowGran := func(Shape) int { return 16 } // 16 float outputs = one line
	gemmGran := func(Shape) int { return 16 }
	tokGranCols := func(s Shape) int { return lineGranule(s.Cols) }
	tokGranHeads := func(s Shape) int { return lineGranule(s.Heads * s.HeadD) }
	t := [numOps]OpRow{
		OpQuantizeQ8_0: {Name: "quantize_q8_0", Split: SplitBlocks, Units: func(s Shape) int { return s.N / QK },
			Granule: func(Shape) int { return 32 }, Elements: elems, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{1 << 16, 1 << 16}},
		OpGemvQ8_0: {Name: "gemv_q8_0", Split: SplitRows, Units: rows, Granule: rowGran, Elements: weights,
			ThreadpoolSafe: true, ScratchBytes: none, MinElements: [numModes]int{32768, 32768}},
		OpGemvQ5_0: {Name: "gemv_q5_0", Split: SplitRows, Units: rows, Granule: rowGran, Elements: weights,
			ThreadpoolSafe: true, ScratchBytes: none, MinElements: [numModes]int{32768, 32768}},
		OpGemvQ8_0F32: {Name: "gemv_q8_0_f32", Split: SplitRows, Units: rows, Granule: rowGran, Elements: weights,
			ThreadpoolSafe: true, NeedsPrivateScratch: true, ScratchBytes: func(s Shape) int { return q8Bytes(s.Cols) },
			MinElements: [numModes]int{32768, 32768}},
		OpGemvQ5_0F32: {Name: "gemv_q5_0_f32", Split: SplitRows, Units: rows, Granule: rowGran, Elements: weights,
			ThreadpoolSafe: true, NeedsPrivateScratch: true, ScratchBytes: func(s Shape) int { return q8Bytes(s.Cols) },
			MinElements: [numModes]int{32768, 32768}},
		OpGemvF32: {Name: "gemv_f32", Split: SplitRows, Units: rows, Granule: rowGran, Elements: weights,
			ThreadpoolSafe: true, ScratchBytes: none, MinElements: [numModes]int{16384, 16384}},
		OpGemmQ8_0: {Name: "gemm_q8_0", Split: SplitRows, Units: rows, Granule: gemmGran,
			Elements: func(s Shape) int { return s.Rows * s.Cols * s.Tokens }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{65536, 65536}},
		OpGemmQ5_0: {Name: "gemm_q5_0", Split: SplitRows, Units: rows, Granule: gemmGran,
			Elements: func(s Shape) int { return s.Rows * s.Cols * s.Tokens }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{65536, 65536}},
		OpRMSNorm: {Name: "rmsnorm", Split: SplitTokens, Units: tokens, Granule: tokGranCols,
			Elements: func(s Shape) int { return s.Tokens * s.Cols }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{8192, 8192}},
		OpSoftmax: {Name: "softmax", Split: SplitRows, Units: rows, Granule: tokGranCols,
			Elements: func(s Shape) int { return s.Rows * s.Cols }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{8192, 8192}},
		OpSwiGLU: {Name: "swiglu", Split: SplitElements, Units: elems, Granule: func(Shape) int { return 16 },
			Elements: elems, ThreadpoolSafe: true, ScratchBytes: none, MinElements: [numModes]int{16384, 16384}},
		OpAdd: {Name: "add", Split: SplitElements, Units: elems, Granule: func(Shape) int { return 16 },
			Elements: elems, ThreadpoolSafe: true, ScratchBytes: none, MinElements: [numModes]int{32768, 32768}},
		OpRope: {Name: "rope", Split: SplitTokens, Units: tokens, Granule: tokGranHeads,
			Elements: func(s Shape) int { return s.Tokens * s.Heads * s.HeadD }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{16384, 16384}},
		OpKVAppend: {Name: "kv_append", Split: SplitTokens, Units: tokens, Granule: one,
			Elements: func(s Shape) int { return s.Tokens * s.KVHeads * s.HeadD }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{32768, 32768}},
		OpAttention: {Name: "attention", Split: SplitHeads, Units: heads, Granule: one,
			Elements: func(s Shape) int { return s.Tokens * s.Heads * s.Ctx * s.HeadD }, ThreadpoolSafe: true,
			NeedsPrivateScratch: true, ScratchBytes: func(s Shape) int { return 4 * s.Ctx },
			MinElements: [numModes]int{16384, 16384}},
		OpEmbed: {Name: "embed_q8_0", Split: SplitTokens, Units: tokens, Granule: tokGranCols,
			Elements: func(s Shape) int { return s.Tokens * s.Cols }, ThreadpoolSafe: true,
			ScratchBytes: none, MinElements: [numModes]int{16384, 16384}},
	}
	// Pooled calls use asm (the default): a long cgo call parks its goroutine in syscall
	// state, the scheduler then spins up runtime threads looking for work, and with every
	// core pinned to a worker they steal time from the kernels (measured: the caller's share
	// of a pooled 9728x896 GEMV ran 30% slower under cgo than the same C as asm; 2-thread
	// decode 66 -> 78 tok/s, prefill 851 -> 1210). A call the caller runs alone leaves a
	// core free for those threads, so there gcc's faster code wins: single-thread Q8_0/Q5_0
	// GEMV streams 10-15% faster through cgo. Quantization is ~1 us and gcc's is faster.
	t[OpQuantizeQ8_0].Backend = "cgo"
	for _, op := range []Op{OpGemvQ8_0, OpGemvQ5_0, OpGemvQ8_0F32, OpGemvQ5_0F32, OpGemvF32} {
		t[op].MemoryBound = true
	}
	for _, op := range []Op{OpQuantizeQ8_0, OpGemvQ8_0, OpGemvQ5_0, OpGemvQ8_0F32, OpGemvQ5_0F32} {
		t[op].SerialBackend = "cgo"
	}
	for i := range t {
		t[i].Op = Op(i)
	}
	return t
}

// Table returns a copy of the dispatch table rows in use by rt.
func (rt *Runtime) Table() []OpRow {
	out := make([]OpRow, numOps)
	copy(out, rt.table[:])
	return out
}

// String returns the op's table name.
func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

var opNames = func() [numOps]string {
	var n [numOps]string
	t := defaultTable()
	for i := range t {
		n[i] = t[i].Name
	}
	return n
}()

// ParseOp maps a table name ("gemv_q8_0", ...) to its Op.
func ParseOp(name string) (Op, error) {
	for i, n := range opNames {
		if n == name {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("kernelrt: unknown op %q (have %s)", name, strings.Join(opNames[:], ", "))
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
	units := row.Units(s)
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
// Calibrate sets all rows from measurements.
func (rt *Runtime) SetMinElements(op Op, decode, prefill int) error {
	if op < 0 || op >= numOps {
		return fmt.Errorf("kernelrt.SetMinElements: unknown op %d", int(op))
	}
	if decode <= 0 || prefill <= 0 {
		return fmt.Errorf("kernelrt.SetMinElements(%s): thresholds must be positive, got decode=%d prefill=%d", op, decode, prefill)
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
