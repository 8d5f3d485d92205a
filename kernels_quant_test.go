package kernelrt

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The Go block types must have the C structs' sizes, read from csrc/kernelrt.h's _Static_asserts
// (so a change on either side fails here), and their fields the C offsets.
func TestBlockSizesMatchC(t *testing.T) {
	h, err := os.ReadFile("csrc/kernelrt.h")
	if err != nil {
		t.Fatal(err)
	}
	cSize := map[string]uintptr{}
	for _, m := range regexp.MustCompile(`sizeof\(krt_block_(\w+)\) == (\d+)`).FindAllStringSubmatch(string(h), -1) {
		n, _ := strconv.Atoi(m[2])
		cSize[m[1]] = uintptr(n)
	}
	goSize := map[string]uintptr{
		"q8_0": unsafe.Sizeof(BlockQ8_0{}), "q5_0": unsafe.Sizeof(BlockQ5_0{}),
		"q4_0": unsafe.Sizeof(BlockQ4_0{}), "q4_1": unsafe.Sizeof(BlockQ4_1{}), "q5_1": unsafe.Sizeof(BlockQ5_1{}),
		"q4_K": unsafe.Sizeof(BlockQ4K{}), "q5_K": unsafe.Sizeof(BlockQ5K{}), "q6_K": unsafe.Sizeof(BlockQ6K{}),
		"q8_K": unsafe.Sizeof(BlockQ8K{}), "iq4_nl": unsafe.Sizeof(BlockIQ4_NL{}), "q2_K": unsafe.Sizeof(BlockQ2K{}),
		"iq4_xs": unsafe.Sizeof(BlockIQ4_XS{}), "q3_K": unsafe.Sizeof(BlockQ3K{}),
	}
	if len(cSize) != len(goSize) {
		t.Errorf("csrc/kernelrt.h asserts the sizes of %d block types, the Go side has %d", len(cSize), len(goSize))
	}
	for name, want := range cSize {
		if got, ok := goSize[name]; !ok || got != want {
			t.Errorf("block %s: Go size %d, C size %d", name, got, want)
		}
	}
	// Field offsets, as the C structs lay them out (all fields are naturally aligned).
	offs := []struct {
		name      string
		got, want uintptr
	}{
		{"BlockQ4_1.Qs", unsafe.Offsetof(BlockQ4_1{}.Qs), 4},
		{"BlockIQ4_NL.Qs", unsafe.Offsetof(BlockIQ4_NL{}.Qs), 2},
		{"BlockQ5_1.Qh", unsafe.Offsetof(BlockQ5_1{}.Qh), 4},
		{"BlockQ5_1.Qs", unsafe.Offsetof(BlockQ5_1{}.Qs), 8},
		{"BlockQ4K.Scales", unsafe.Offsetof(BlockQ4K{}.Scales), 4},
		{"BlockQ4K.Qs", unsafe.Offsetof(BlockQ4K{}.Qs), 16},
		{"BlockQ5K.Qh", unsafe.Offsetof(BlockQ5K{}.Qh), 16},
		{"BlockQ5K.Qs", unsafe.Offsetof(BlockQ5K{}.Qs), 48},
		{"BlockQ6K.Qh", unsafe.Offsetof(BlockQ6K{}.Qh), 128},
		{"BlockQ6K.Scales", unsafe.Offsetof(BlockQ6K{}.Scales), 192},
		{"BlockQ6K.D", unsafe.Offsetof(BlockQ6K{}.D), 208},
		{"BlockQ8K.Qs", unsafe.Offsetof(BlockQ8K{}.Qs), 4},
		{"BlockQ8K.Bsums", unsafe.Offsetof(BlockQ8K{}.Bsums), 260},
		{"BlockQ2K.Qs", unsafe.Offsetof(BlockQ2K{}.Qs), 16},
		{"BlockQ2K.D", unsafe.Offsetof(BlockQ2K{}.D), 80},
		{"BlockQ2K.Dmin", unsafe.Offsetof(BlockQ2K{}.Dmin), 82},
		{"BlockIQ4_XS.ScalesH", unsafe.Offsetof(BlockIQ4_XS{}.ScalesH), 2},
		{"BlockIQ4_XS.ScalesL", unsafe.Offsetof(BlockIQ4_XS{}.ScalesL), 4},
		{"BlockIQ4_XS.Qs", unsafe.Offsetof(BlockIQ4_XS{}.Qs), 8},
		{"BlockQ3K.Qs", unsafe.Offsetof(BlockQ3K{}.Qs), 32},
		{"BlockQ3K.Scales", unsafe.Offsetof(BlockQ3K{}.Scales), 96},
		{"BlockQ3K.D", unsafe.Offsetof(BlockQ3K{}.D), 108},
	}
	for _, o := range offs {
		if o.got != o.want {
			t.Errorf("%s at offset %d, C has %d", o.name, o.got, o.want)
		}
	}
	if blockWeights[BlockQ4_0]() != QK || blockWeights[BlockQ5_1]() != QK || blockWeights[BlockQ6K]() != QKK || blockWeights[BlockQ8K]() != QKK {
		t.Error("blockWeights: wrong block size")
	}
}

func TestBlockLineGranule(t *testing.T) {
	for _, bytes := range []int{34, 22, 18, 20, 24, 144, 176, 210, 292, 64, 1} {
		g := blockLineGranule(bytes)
		if g*bytes%64 != 0 {
			t.Errorf("%d-byte blocks: granule %d is %d bytes, not whole lines", bytes, g, g*bytes)
		}
		for h := 1; h < g; h++ {
			if h*bytes%64 == 0 {
				t.Errorf("%d-byte blocks: granule %d, but %d blocks already fill whole lines", bytes, g, h)
			}
		}
	}
}

func TestQuantArgErrors(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	q40 := func(n int) []BlockQ4_0 { return make([]BlockQ4_0, n) }
	q51 := func(n int) []BlockQ5_1 { return make([]BlockQ5_1, n) }
	q4k := func(n int) []BlockQ4K { return make([]BlockQ4K, n) }
	q6k := func(n int) []BlockQ6K { return make([]BlockQ6K, n) }
	q8 := func(n int) []BlockQ8_0 { return make([]BlockQ8_0, n) }
	q8k := func(n int) []BlockQ8K { return make([]BlockQ8K, n) }
	iq4 := func(n int) []BlockIQ4_NL { return make([]BlockIQ4_NL, n) }
	q2k := func(n int) []BlockQ2K { return make([]BlockQ2K, n) }
	ixs := func(n int) []BlockIQ4_XS { return make([]BlockIQ4_XS, n) }
	q3k := func(n int) []BlockQ3K { return make([]BlockQ3K, n) }
	buf := f(8192)
	q4kAt := func(off, n int) []BlockQ4K { return unsafe.Slice((*BlockQ4K)(unsafe.Pointer(&buf[off])), n) }
	q8kAt := func(off, n int) []BlockQ8K { return unsafe.Slice((*BlockQ8K)(unsafe.Pointer(&buf[off])), n) }
	const big = 1 << 62

	cases := []struct {
		err      error
		fn, arg  string
		contains []string
	}{
		{QuantizeQ4_0(q40(1), f(48)), "QuantizeQ4_0", "src", []string{"length 48", "multiple of 32"}},
		{QuantizeQ4_1(nil, f(64)), "QuantizeQ4_1", "dst", []string{"nil", "len(src)/32 = 2 blocks"}},
		{QuantizeQ5_1(q51(3), f(64)), "QuantizeQ5_1", "dst", []string{"length 3", "len(src)/32 = 2 blocks"}},
		{QuantizeQ4K(q4k(1), f(128)), "QuantizeQ4K", "src", []string{"length 128", "multiple of 256"}},
		{QuantizeQ4K(q4k(1), nil), "QuantizeQ4K", "src", []string{"nil", "multiple of 256"}},
		{QuantizeQ5K(nil, f(512)), "QuantizeQ5K", "dst", []string{"nil", "len(src)/256 = 2 blocks"}},
		{QuantizeQ6K(q6k(1), f(512)), "QuantizeQ6K", "dst", []string{"length 1", "len(src)/256 = 2 blocks"}},
		{QuantizeQ8K(q8kAt(100, 1), buf[:256]), "QuantizeQ8K", "dst", []string{"overlaps src"}},
		{QuantizeIQ4_NL(iq4(1), f(48)), "QuantizeIQ4_NL", "src", []string{"length 48", "multiple of 32"}},
		{QuantizeIQ4_NL(nil, f(64)), "QuantizeIQ4_NL", "dst", []string{"nil", "len(src)/32 = 2 blocks"}},
		{QuantizeQ2K(q2k(1), f(128)), "QuantizeQ2K", "src", []string{"length 128", "multiple of 256"}},
		{QuantizeQ2K(q2k(3), f(512)), "QuantizeQ2K", "dst", []string{"length 3", "len(src)/256 = 2 blocks"}},
		{QuantizeIQ4_XS(ixs(1), f(32)), "QuantizeIQ4_XS", "src", []string{"length 32", "multiple of 256"}},
		{QuantizeIQ4_XS(ixs(1), f(512)), "QuantizeIQ4_XS", "dst", []string{"length 1", "len(src)/256 = 2 blocks"}},
		{QuantizeQ3K(q3k(1), f(300)), "QuantizeQ3K", "src", []string{"length 300", "multiple of 256"}},

		{DequantizeQ4_0(f(33), q40(1)), "DequantizeQ4_0", "dst", []string{"length 33", "len(src)*32 = 32 floats"}},
		{DequantizeQ4K(f(256), nil), "DequantizeQ4K", "src", []string{"nil"}},
		{DequantizeQ5K(f(256), []BlockQ5K{}), "DequantizeQ5K", "src", []string{"empty"}},
		{DequantizeQ6K(f(256), q6k(2)), "DequantizeQ6K", "dst", []string{"length 256", "len(src)*256 = 512 floats"}},
		{DequantizeQ8K(buf[:256], q8kAt(200, 1)), "DequantizeQ8K", "dst", []string{"overlaps src"}},
		{DequantizeIQ4_NL(f(33), iq4(1)), "DequantizeIQ4_NL", "dst", []string{"length 33", "len(src)*32 = 32 floats"}},
		{DequantizeQ2K(f(256), q2k(2)), "DequantizeQ2K", "dst", []string{"length 256", "len(src)*256 = 512 floats"}},
		{DequantizeIQ4_XS(f(768), ixs(2)), "DequantizeIQ4_XS", "dst", []string{"length 768", "len(src)*256 = 512 floats"}},
		{DequantizeQ3K(f(256), nil), "DequantizeQ3K", "src", []string{"nil"}},

		{GemvQ4_0(f(2), q40(2), q8(1), 2, 48), "GemvQ4_0", "cols", []string{"multiple of 32", "got 48"}},
		{GemvQ4_0(f(2), q40(3), q8(1), 2, 32), "GemvQ4_0", "w", []string{"length 3", "rows*cols/32 = 2 blocks"}},
		{GemvQ5_1Bias(f(2), q51(2), q8(1), f(3), 2, 32), "GemvQ5_1Bias", "bias", []string{"length 3", "rows = 2 floats"}},
		{GemvIQ4_NL(f(2), iq4(2), q8(1), 2, 48), "GemvIQ4_NL", "cols", []string{"multiple of 32", "got 48"}},
		{GemvIQ4_NLBias(f(2), iq4(3), q8(1), nil, 2, 32), "GemvIQ4_NLBias", "w", []string{"length 3", "rows*cols/32 = 2 blocks"}},
		{GemvQ4K(f(2), q4k(2), q8k(1), 2, 128), "GemvQ4K", "cols", []string{"multiple of 256", "got 128"}},
		{GemvQ2K(f(2), q2k(2), q8k(1), 2, 128), "GemvQ2K", "cols", []string{"multiple of 256", "got 128"}},
		{GemvQ2KBias(f(2), q2k(3), q8k(1), nil, 2, 256), "GemvQ2KBias", "w", []string{"length 3", "rows*cols/256 = 2 blocks"}},
		{GemvIQ4_XS(f(2), ixs(2), q8k(1), 2, 32), "GemvIQ4_XS", "cols", []string{"multiple of 256", "got 32"}},
		{GemvIQ4_XSBias(f(2), ixs(2), q8k(1), f(1), 2, 256), "GemvIQ4_XSBias", "bias", []string{"length 1", "rows = 2 floats"}},
		{GemvQ3K(f(2), q3k(2), q8k(1), 2, 128), "GemvQ3K", "cols", []string{"multiple of 256", "got 128"}},
		{GemvQ3KBias(f(2), q3k(3), q8k(1), nil, 2, 256), "GemvQ3KBias", "w", []string{"length 3", "rows*cols/256 = 2 blocks"}},
		{GemvQ4K(f(2), q4k(2), q8k(1), 0, 256), "GemvQ4K", "rows", []string{"positive", "got 0"}},
		{GemvQ4K(f(2), q4k(2), q8k(1), big, 512), "GemvQ4K", "rows", []string{"overflows"}},
		{GemvQ4K(f(2), q4k(3), q8k(1), 2, 256), "GemvQ4K", "w", []string{"length 3", "rows*cols/256 = 2 blocks"}},
		{GemvQ5K(f(2), make([]BlockQ5K, 4), q8k(1), 2, 512), "GemvQ5K", "x", []string{"length 1", "cols/256 = 2 blocks"}},
		{GemvQ6K(nil, q6k(2), q8k(1), 2, 256), "GemvQ6K", "y", []string{"nil", "rows = 2 floats"}},
		{GemvQ4KBias(buf[:2], q4kAt(0, 2), q8k(1), nil, 2, 256), "GemvQ4KBias", "y", []string{"overlaps w"}},
		{GemvQ6KBias(buf[:2], q6k(2), q8kAt(0, 1), nil, 2, 256), "GemvQ6KBias", "y", []string{"overlaps x"}},
		{GemvQ5KBias(buf[:2], make([]BlockQ5K, 2), q8k(1), buf[:2], 2, 256), "GemvQ5KBias", "y", []string{"overlaps bias"}},

		{GemmQ4_0(f(6), q40(2), q8(2), nil, 2, 32, 3), "GemmQ4_0", "x", []string{"length 2", "tokens*cols/32 = 3 blocks"}},
		{GemmQ5_1(f(6), q51(2), q8(3), nil, 2, 32, 0), "GemmQ5_1", "tokens", []string{"positive", "got 0"}},
		{GemmIQ4_NL(f(6), iq4(2), q8(2), nil, 2, 32, 3), "GemmIQ4_NL", "x", []string{"length 2", "tokens*cols/32 = 3 blocks"}},
		{GemmQ4K(f(6), q4k(2), q8k(3), nil, 2, 384, 3), "GemmQ4K", "cols", []string{"multiple of 256", "got 384"}},
		{GemmQ5K(f(5), make([]BlockQ5K, 2), q8k(3), nil, 2, 256, 3), "GemmQ5K", "y", []string{"length 5", "tokens*rows = 6 floats"}},
		{GemmQ6K(f(6), q6k(2), q8k(2), nil, 2, 256, 3), "GemmQ6K", "x", []string{"length 2", "tokens*cols/256 = 3 blocks"}},
		{GemmQ6K(f(6), q6k(2), q8k(3), f(3), 2, 256, 3), "GemmQ6K", "bias", []string{"length 3", "rows = 2 floats"}},
		{GemmQ2K(f(6), q2k(2), q8k(2), nil, 2, 256, 3), "GemmQ2K", "x", []string{"length 2", "tokens*cols/256 = 3 blocks"}},
		{GemmIQ4_XS(f(6), ixs(1), q8k(3), nil, 2, 256, 3), "GemmIQ4_XS", "w", []string{"length 1", "rows*cols/256 = 2 blocks"}},
		{GemmQ3K(f(6), q3k(2), q8k(3), f(3), 2, 256, 3), "GemmQ3K", "bias", []string{"length 3", "rows = 2 floats"}},
	}
	for i, c := range cases {
		if c.err == nil {
			t.Errorf("case %d (%s %s): no error", i, c.fn, c.arg)
			continue
		}
		wantArgErr(t, c.err, c.fn, c.arg, c.contains...)
	}
}

// quantFuncs are one block type's public functions (nil where the type has none).
type quantFuncs[B block, X actBlock] struct {
	name   string
	quant  func([]B, []float32) error
	deq    func([]float32, []B) error
	gemv   func(y []float32, w []B, x []X, bias []float32, rows, cols int) error
	gemm   func(y []float32, w []B, x []X, bias []float32, rows, cols, tokens int) error
	quantX func([]X, []float32) error
}

// TestQuantTypesGuardPages runs every new type's quantizer, dequantizer, GEMV and GEMM with each
// argument directly before a PROT_NONE page and directly after one, for row counts around every
// unroll factor: a read or write outside the arguments faults, and results must equal those
// from ordinary memory.
func TestQuantTypesGuardPages(t *testing.T) {
	forEachSet(t, "GemvQ4K", func(t *testing.T, s *kern.Set) {
		for _, tail := range []bool{true, false} {
			guardQuant(t, s, tail, quantFuncs[BlockQ4_0, BlockQ8_0]{"Q4_0", QuantizeQ4_0, DequantizeQ4_0, GemvQ4_0Bias, GemmQ4_0, QuantizeQ8_0})
			guardQuant(t, s, tail, quantFuncs[BlockQ4_1, BlockQ8_0]{"Q4_1", QuantizeQ4_1, DequantizeQ4_1, nil, nil, nil})
			guardQuant(t, s, tail, quantFuncs[BlockQ5_1, BlockQ8_0]{"Q5_1", QuantizeQ5_1, DequantizeQ5_1, GemvQ5_1Bias, GemmQ5_1, QuantizeQ8_0})
			guardQuant(t, s, tail, quantFuncs[BlockQ4K, BlockQ8K]{"Q4K", QuantizeQ4K, DequantizeQ4K, GemvQ4KBias, GemmQ4K, QuantizeQ8K})
			guardQuant(t, s, tail, quantFuncs[BlockQ5K, BlockQ8K]{"Q5K", QuantizeQ5K, DequantizeQ5K, GemvQ5KBias, GemmQ5K, QuantizeQ8K})
			guardQuant(t, s, tail, quantFuncs[BlockQ6K, BlockQ8K]{"Q6K", QuantizeQ6K, DequantizeQ6K, GemvQ6KBias, GemmQ6K, QuantizeQ8K})
			guardQuant(t, s, tail, quantFuncs[BlockQ8K, BlockQ8K]{"Q8K", QuantizeQ8K, DequantizeQ8K, nil, nil, nil})
			guardQuant(t, s, tail, quantFuncs[BlockIQ4_NL, BlockQ8_0]{"IQ4_NL", QuantizeIQ4_NL, DequantizeIQ4_NL, GemvIQ4_NLBias, GemmIQ4_NL, QuantizeQ8_0})
			guardQuant(t, s, tail, quantFuncs[BlockQ2K, BlockQ8K]{"Q2K", QuantizeQ2K, DequantizeQ2K, GemvQ2KBias, GemmQ2K, QuantizeQ8K})
			guardQuant(t, s, tail, quantFuncs[BlockIQ4_XS, BlockQ8K]{"IQ4_XS", QuantizeIQ4_XS, DequantizeIQ4_XS, GemvIQ4_XSBias, GemmIQ4_XS, QuantizeQ8K})
			guardQuant(t, s, tail, quantFuncs[BlockQ3K, BlockQ8K]{"Q3K", QuantizeQ3K, DequantizeQ3K, GemvQ3KBias, GemmQ3K, QuantizeQ8K})
		}
	})
}

func guardQuant[B block, X actBlock](t *testing.T, s *kern.Set, tail bool, q quantFuncs[B, X]) {
	t.Helper()
	placeB, placeX, placeF := guardHead[B], guardHead[X], guardHead[float32]
	where := "head"
	if tail {
		placeB, placeX, placeF, where = guardTail[B], guardTail[X], guardTail[float32], "tail"
	}
	qk, qx := blockWeights[B](), blockWeights[X]()
	rng := newRand(uint64(len(q.name)) * 77)
	colsList := []int{qk, 3 * qk, 7 * qk}
	if qk == QKK {
		colsList = []int{QKK, 3 * QKK}
	}
	for _, rows := range []int{1, 2, 3, 5, 9, 17} {
		for _, cols := range colsList {
			name := fmt.Sprintf("%s %s %dx%d", where, q.name, rows, cols)
			wf := randScaledF32(rng, rows*cols)
			w := make([]B, rows*cols/qk)
			mustOK(t, q.quant(w, wf))
			gw := placeB(t, len(w))
			mustOK(t, q.quant(gw, guardedCopy(t, wf, placeF)))
			if !bytes.Equal(bytesOfBlocks(gw), bytesOfBlocks(w)) {
				t.Errorf("%s: quantize differs in guarded memory", name)
			}
			deq, gdeq := make([]float32, rows*cols), placeF(t, rows*cols)
			mustOK(t, q.deq(deq, w))
			mustOK(t, q.deq(gdeq, guardedCopy(t, w, placeB)))
			mustSame(t, name+" dequantize", gdeq, deq)
			if q.gemv == nil {
				continue
			}
			const T = 3
			x := make([]X, T*cols/qx)
			mustOK(t, q.quantX(x, randF32(rng, T*cols, 1)))
			bias := randF32(rng, rows, 1)
			gx, gbias := guardedCopy(t, x, placeX), guardedCopy(t, bias, placeF)
			want, gy := make([]float32, T*rows), placeF(t, T*rows)
			mustOK(t, q.gemv(want[:rows], w, x[:cols/qx], bias, rows, cols))
			mustOK(t, q.gemv(gy[len(gy)-rows:], gw, guardedCopy(t, x[:cols/qx], placeX), gbias, rows, cols))
			mustSame(t, name+" gemv", gy[len(gy)-rows:], want[:rows])
			mustOK(t, q.gemm(want, w, x, bias, rows, cols, T))
			mustOK(t, q.gemm(gy, gw, gx, gbias, rows, cols, T))
			mustSame(t, name+" gemm", gy, want)
		}
	}
}

// bytesOfBlocks views a block slice's bytes.
func bytesOfBlocks[B block](s []B) []byte {
	var z B
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

func TestQuantTypesNoAllocs(t *testing.T) {
	rng := newRand(21)
	const rows, cols, T = 5, 512, 3
	xf := randF32(rng, T*cols, 1)
	x8, x8k := make([]BlockQ8_0, T*cols/QK), make([]BlockQ8K, T*cols/QKK)
	mustOK(t, QuantizeQ8_0(x8, xf))
	mustOK(t, QuantizeQ8K(x8k, xf))
	w40, w41, w51 := make([]BlockQ4_0, rows*cols/QK), make([]BlockQ4_1, rows*cols/QK), make([]BlockQ5_1, rows*cols/QK)
	w4k, w5k, w6k := make([]BlockQ4K, rows*cols/QKK), make([]BlockQ5K, rows*cols/QKK), make([]BlockQ6K, rows*cols/QKK)
	wnl := make([]BlockIQ4_NL, rows*cols/QK)
	w2k := make([]BlockQ2K, rows*cols/QKK)
	wxs := make([]BlockIQ4_XS, rows*cols/QKK)
	w3k := make([]BlockQ3K, rows*cols/QKK)
	wf := randF32(rng, rows*cols, 1)
	deq, bias, y := make([]float32, rows*cols), randF32(rng, rows, 1), make([]float32, T*rows)
	forEachSet(t, "GemvQ4K", func(t *testing.T, s *kern.Set) {
		for _, c := range []struct {
			name string
			fn   func() error
		}{
			{"QuantizeQ4_0", func() error { return QuantizeQ4_0(w40, wf) }},
			{"QuantizeQ4_1", func() error { return QuantizeQ4_1(w41, wf) }},
			{"QuantizeQ5_1", func() error { return QuantizeQ5_1(w51, wf) }},
			{"QuantizeQ4K", func() error { return QuantizeQ4K(w4k, wf) }},
			{"QuantizeQ5K", func() error { return QuantizeQ5K(w5k, wf) }},
			{"QuantizeQ6K", func() error { return QuantizeQ6K(w6k, wf) }},
			{"QuantizeQ8K", func() error { return QuantizeQ8K(x8k, xf) }},
			{"DequantizeQ4_0", func() error { return DequantizeQ4_0(deq, w40) }},
			{"DequantizeQ4_1", func() error { return DequantizeQ4_1(deq, w41) }},
			{"DequantizeQ5_1", func() error { return DequantizeQ5_1(deq, w51) }},
			{"DequantizeQ4K", func() error { return DequantizeQ4K(deq, w4k) }},
			{"DequantizeQ5K", func() error { return DequantizeQ5K(deq, w5k) }},
			{"DequantizeQ6K", func() error { return DequantizeQ6K(deq, w6k) }},
			{"DequantizeQ8K", func() error { return DequantizeQ8K(deq[:cols], x8k[:cols/QKK]) }},
			{"GemvQ4_0", func() error { return GemvQ4_0(y[:rows], w40, x8[:cols/QK], rows, cols) }},
			{"GemvQ5_1Bias", func() error { return GemvQ5_1Bias(y[:rows], w51, x8[:cols/QK], bias, rows, cols) }},
			{"GemvQ4K", func() error { return GemvQ4K(y[:rows], w4k, x8k[:cols/QKK], rows, cols) }},
			{"GemvQ5KBias", func() error { return GemvQ5KBias(y[:rows], w5k, x8k[:cols/QKK], bias, rows, cols) }},
			{"GemvQ6K", func() error { return GemvQ6K(y[:rows], w6k, x8k[:cols/QKK], rows, cols) }},
			{"GemmQ4_0", func() error { return GemmQ4_0(y, w40, x8, bias, rows, cols, T) }},
			{"GemmQ5_1", func() error { return GemmQ5_1(y, w51, x8, nil, rows, cols, T) }},
			{"GemmQ4K", func() error { return GemmQ4K(y, w4k, x8k, bias, rows, cols, T) }},
			{"GemmQ5K", func() error { return GemmQ5K(y, w5k, x8k, nil, rows, cols, T) }},
			{"GemmQ6K", func() error { return GemmQ6K(y, w6k, x8k, bias, rows, cols, T) }},
			{"QuantizeIQ4_NL", func() error { return QuantizeIQ4_NL(wnl, wf) }},
			{"DequantizeIQ4_NL", func() error { return DequantizeIQ4_NL(deq, wnl) }},
			{"GemvIQ4_NLBias", func() error { return GemvIQ4_NLBias(y[:rows], wnl, x8[:cols/QK], bias, rows, cols) }},
			{"GemmIQ4_NL", func() error { return GemmIQ4_NL(y, wnl, x8, bias, rows, cols, T) }},
			{"QuantizeQ2K", func() error { return QuantizeQ2K(w2k, wf) }},
			{"DequantizeQ2K", func() error { return DequantizeQ2K(deq, w2k) }},
			{"GemvQ2KBias", func() error { return GemvQ2KBias(y[:rows], w2k, x8k[:cols/QKK], bias, rows, cols) }},
			{"GemmQ2K", func() error { return GemmQ2K(y, w2k, x8k, bias, rows, cols, T) }},
			{"QuantizeIQ4_XS", func() error { return QuantizeIQ4_XS(wxs, wf) }},
			{"DequantizeIQ4_XS", func() error { return DequantizeIQ4_XS(deq, wxs) }},
			{"GemvIQ4_XSBias", func() error { return GemvIQ4_XSBias(y[:rows], wxs, x8k[:cols/QKK], bias, rows, cols) }},
			{"GemmIQ4_XS", func() error { return GemmIQ4_XS(y, wxs, x8k, bias, rows, cols, T) }},
			{"QuantizeQ3K", func() error { return QuantizeQ3K(w3k, wf) }},
			{"DequantizeQ3K", func() error { return DequantizeQ3K(deq, w3k) }},
			{"GemvQ3KBias", func() error { return GemvQ3KBias(y[:rows], w3k, x8k[:cols/QKK], bias, rows, cols) }},
			{"GemmQ3K", func() error { return GemmQ3K(y, w3k, x8k, bias, rows, cols, T) }},
		} {
			mustOK(t, c.fn())
			wantNoAllocs(t, c.name, func() { c.fn() })
		}
	})
}
