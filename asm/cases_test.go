//go:build amd64 && !noasm

package asm

import (
	"math"
	"math/rand/v2"
	"strconv"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"

	_ "github.com/kernelrt/kernelrt/internal/generic" // the pure-Go reference backend
)

// A test case runs one op of a kern.Set on fixed inputs and returns its output buffers.
// Every buffer is pre-filled with the same sentinel, so writes outside the op's slice show up
// as differences too.

const (
	q8Size = 34 // bytes of a krt_block_q8_0
	q5Size = 22 // bytes of a krt_block_q5_0
	qk     = 32
)

type output struct {
	name  string
	b     []byte
	exact bool // byte-identical required (quantized blocks); otherwise float32 within tolerance
}

type opCase struct {
	name  string
	field string // kern.Set field
	exact bool   // every output must be byte-identical (quantizers, pure data movement)
	// refOnly: compare only the ref variant with the other backends (an edge case whose
	// SIMD semantics differ in C itself); SIMD variants are still compared with cgo.
	refOnly bool
	has     func(s *kern.Set) bool
	run     func(s *kern.Set) []output
}

// sentinel is a quiet NaN with a payload no kernel produces.
const sentinel = 0x7fc0dead

func p[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func f32s(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = math.Float32frombits(sentinel)
	}
	return s
}

func bytesOf[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

func fout(name string, s []float32) output { return output{name: name, b: bytesOf(s)} }

func randFloats(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64()) * scale
	}
	return s
}

// genericSet is the pure-Go backend, used to build quantized inputs.
func genericSet() *kern.Set {
	s, err := kern.Lookup("generic", cpu.Ref)
	if err != nil {
		panic(err)
	}
	return s
}

func quantQ8(x []float32) []byte {
	nb := len(x) / qk
	b := make([]byte, nb*q8Size)
	genericSet().QuantizeQ8_0(p(b), p(x), 0, nb)
	return b
}

func quantQ5(x []float32) []byte {
	nb := len(x) / qk
	b := make([]byte, nb*q5Size)
	genericSet().QuantizeQ5_0(p(b), p(x), 0, nb)
	return b
}

// quantInput is 40 blocks of floats with the interesting blocks at the front: all zeros, one
// huge value, tiny values, and then Gaussian data at several scales.
func quantInput(r *rand.Rand) []float32 {
	x := randFloats(r, 40*qk, 1)
	for j := 0; j < qk; j++ {
		x[j] = 0
		x[qk+j] *= 1e-3
		x[2*qk+j] *= 1e-30
		x[4*qk+j] *= 1000
	}
	x[3*qk+5] = 3e4
	x[5*qk+7] = -x[5*qk+3] // equal magnitudes of both signs
	return x
}

func allCases() []opCase {
	r := rand.New(rand.NewPCG(1, 2))
	var cs []opCase

	// ---- quantization ----
	qx := quantInput(r)
	for _, q := range []struct {
		name, field string
		size        int
		fn          func(s *kern.Set) func(dst, src kern.P, b0, b1 int)
	}{
		{"QuantizeQ8_0", "QuantizeQ8_0", q8Size, func(s *kern.Set) func(dst, src kern.P, b0, b1 int) { return s.QuantizeQ8_0 }},
		{"QuantizeQ5_0", "QuantizeQ5_0", q5Size, func(s *kern.Set) func(dst, src kern.P, b0, b1 int) { return s.QuantizeQ5_0 }},
	} {
		q := q
		cs = append(cs, opCase{name: q.name, field: q.field, exact: true,
			has: func(s *kern.Set) bool { return q.fn(s) != nil },
			run: func(s *kern.Set) []output {
				nb := len(qx) / qk
				dst := make([]byte, nb*q.size)
				for i := range dst {
					dst[i] = 0xa5
				}
				q.fn(s)(p(dst), p(qx), 1, nb-1)
				return []output{{name: "dst", b: dst, exact: true}}
			}})
	}
	q8 := quantQ8(qx)
	q5 := quantQ5(qx)
	cs = append(cs,
		opCase{name: "DequantizeQ8_0", field: "DequantizeQ8_0", exact: true,
			has: func(s *kern.Set) bool { return s.DequantizeQ8_0 != nil },
			run: func(s *kern.Set) []output {
				y := f32s(len(qx))
				s.DequantizeQ8_0(p(y), p(q8), 2, len(qx)/qk-1)
				return []output{{name: "y", b: bytesOf(y), exact: true}}
			}},
		opCase{name: "DequantizeQ5_0", field: "DequantizeQ5_0", exact: true,
			has: func(s *kern.Set) bool { return s.DequantizeQ5_0 != nil },
			run: func(s *kern.Set) []output {
				y := f32s(len(qx))
				s.DequantizeQ5_0(p(y), p(q5), 2, len(qx)/qk-1)
				return []output{{name: "y", b: bytesOf(y), exact: true}}
			}},
	)

	// ---- GEMV ----
	const rows, cols = 37, 896
	wf := randFloats(r, rows*cols, 0.05)
	w8, w5 := quantQ8(wf), quantQ5(wf)
	xf := randFloats(r, cols, 1)
	x8 := quantQ8(xf)
	bias := randFloats(r, rows, 0.1)
	for _, withBias := range []bool{false, true} {
		b := bias
		sfx := ""
		if withBias {
			sfx = "+bias"
		} else {
			b = nil
		}
		cs = append(cs,
			opCase{name: "GemvQ8_0" + sfx, field: "GemvQ8_0",
				has: func(s *kern.Set) bool { return s.GemvQ8_0 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(rows)
					s.GemvQ8_0(p(y), p(w8), p(x8), p(b), cols, 3, rows-1)
					return []output{fout("y", y)}
				}},
			opCase{name: "GemvQ5_0" + sfx, field: "GemvQ5_0",
				has: func(s *kern.Set) bool { return s.GemvQ5_0 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(rows)
					s.GemvQ5_0(p(y), p(w5), p(x8), p(b), cols, 3, rows-1)
					return []output{fout("y", y)}
				}},
			opCase{name: "GemvQ8_0F32" + sfx, field: "GemvQ8_0F32",
				has: func(s *kern.Set) bool { return s.GemvQ8_0F32 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(rows)
					xq := make([]byte, cols/qk*q8Size)
					s.GemvQ8_0F32(p(y), p(w8), p(xf), p(xq), p(b), cols, 0, rows)
					return []output{fout("y", y), {name: "xq", b: xq, exact: true}}
				}},
			opCase{name: "GemvQ5_0F32" + sfx, field: "GemvQ5_0F32",
				has: func(s *kern.Set) bool { return s.GemvQ5_0F32 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(rows)
					xq := make([]byte, cols/qk*q8Size)
					s.GemvQ5_0F32(p(y), p(w5), p(xf), p(xq), p(b), cols, 1, rows)
					return []output{fout("y", y), {name: "xq", b: xq, exact: true}}
				}},
		)
	}
	const fcols = 901
	wff := randFloats(r, rows*fcols, 0.05)
	xff := randFloats(r, fcols, 1)
	cs = append(cs, opCase{name: "GemvF32", field: "GemvF32",
		has: func(s *kern.Set) bool { return s.GemvF32 != nil },
		run: func(s *kern.Set) []output {
			y := f32s(rows)
			s.GemvF32(p(y), p(wff), p(xff), fcols, 2, rows-2)
			return []output{fout("y", y)}
		}})

	// ---- GEMM: a small shape (tails everywhere) and one crossing the token-block and
	// column-chunk sizes of the SIMD tilings ----
	for _, g := range []struct{ rows, cols, T, r0, r1 int }{{40, 9 * qk, 7, 1, 39}, {70, 17 * qk, 130, 0, 70}} {
		g := g
		gw := randFloats(r, g.rows*g.cols, 0.05)
		gw8, gw5 := quantQ8(gw), quantQ5(gw)
		gx := quantQ8(randFloats(r, g.T*g.cols, 1))
		gb := randFloats(r, g.rows, 0.1)
		name := "GemmQ8_0/small"
		if g.T > 100 {
			name = "GemmQ8_0/large"
		}
		cs = append(cs,
			opCase{name: name, field: "GemmQ8_0",
				has: func(s *kern.Set) bool { return s.GemmQ8_0 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(g.T * g.rows)
					s.GemmQ8_0(p(y), p(gw8), p(gx), p(gb), g.rows, g.cols, g.T, g.r0, g.r1)
					return []output{fout("y", y)}
				}},
			opCase{name: "GemmQ5_0" + name[8:], field: "GemmQ5_0",
				has: func(s *kern.Set) bool { return s.GemmQ5_0 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(g.T * g.rows)
					s.GemmQ5_0(p(y), p(gw5), p(gx), nil, g.rows, g.cols, g.T, g.r0, g.r1)
					return []output{fout("y", y)}
				}},
		)
	}

	// ---- GEMM with no columns: y = bias or 0. clang turns the _ref loop for this case into
	// memset calls, which c2goasm routes to clib_amd64.s: this case runs them. (The C SIMD
	// variants leave y untouched for cols == 0, hence refOnly.) ----
	{
		const rows, T = 9, 3
		gb := randFloats(r, rows, 0.1)
		dummy := make([]byte, rows*T*q8Size) // never read: no columns
		for _, b := range [][]float32{nil, gb} {
			b := b
			name := "GemmQ8_0/cols0"
			if b != nil {
				name += "+bias"
			}
			cs = append(cs, opCase{name: name, field: "GemmQ8_0", refOnly: true,
				has: func(s *kern.Set) bool { return s.GemmQ8_0 != nil },
				run: func(s *kern.Set) []output {
					y := f32s(T * rows)
					s.GemmQ8_0(p(y), p(dummy), p(dummy), p(b), rows, 0, T, 1, rows-1)
					return []output{fout("y", y)}
				}})
		}
	}

	// ---- norms ----
	const dim, ntok = 903, 3
	nx := randFloats(r, dim*ntok, 2)
	nw := randFloats(r, dim, 1)
	cs = append(cs, opCase{name: "RMSNorm", field: "RMSNorm",
		has: func(s *kern.Set) bool { return s.RMSNorm != nil },
		run: func(s *kern.Set) []output {
			y := f32s(dim * ntok)
			s.RMSNorm(p(y), p(nx), p(nw), 1e-6, dim, 0, ntok)
			return []output{fout("y", y)}
		}})
	const scols, srows = 77, 6
	sx := randFloats(r, scols*srows, 3)
	valid := []int32{5, 1, 77, 16, 17, 33}
	for _, v := range [][]int32{nil, valid} {
		v := v
		name := "Softmax"
		if v != nil {
			name += "+valid"
		}
		cs = append(cs, opCase{name: name, field: "Softmax",
			has: func(s *kern.Set) bool { return s.Softmax != nil },
			run: func(s *kern.Set) []output {
				x := append([]float32(nil), sx...)
				s.Softmax(p(x), p(v), scols, 1, srows)
				return []output{fout("x", x)}
			}})
	}

	// ---- elementwise ----
	const n = 1000
	ga, gu := randFloats(r, n, 4), randFloats(r, n, 1)
	ga[10], ga[11], ga[12] = -95, 95, -30
	cs = append(cs,
		opCase{name: "SwiGLU", field: "SwiGLU",
			has: func(s *kern.Set) bool { return s.SwiGLU != nil },
			run: func(s *kern.Set) []output {
				y := f32s(n)
				s.SwiGLU(p(y), p(ga), p(gu), 3, n-3)
				return []output{fout("y", y)}
			}},
		opCase{name: "Add", field: "Add", exact: true,
			has: func(s *kern.Set) bool { return s.Add != nil },
			run: func(s *kern.Set) []output {
				y := f32s(n)
				s.Add(p(y), p(ga), p(gu), 3, n-3)
				return []output{{name: "y", b: bytesOf(y), exact: true}}
			}},
	)

	// ---- RoPE and KV cache ----
	for _, hd := range []int{64, 24} {
		hd := hd
		const nHeads, pos0, T = 3, 7, 4
		stride := nHeads*hd + 5
		rx := randFloats(r, T*stride, 1)
		cosT := make([]float32, (pos0+T)*hd/2)
		sinT := make([]float32, (pos0+T)*hd/2)
		for pos := 0; pos < pos0+T; pos++ {
			for i := 0; i < hd/2; i++ {
				th := float64(pos) * math.Pow(10000, -2*float64(i)/float64(hd))
				cosT[pos*hd/2+i] = float32(math.Cos(th))
				sinT[pos*hd/2+i] = float32(math.Sin(th))
			}
		}
		name := "RopeNeox/hd64"
		if hd != 64 {
			name = "RopeNeox/hd24"
		}
		cs = append(cs, opCase{name: name, field: "RopeNeox",
			has: func(s *kern.Set) bool { return s.RopeNeox != nil },
			run: func(s *kern.Set) []output {
				x := append([]float32(nil), rx...)
				s.RopeNeox(p(x), p(cosT), p(sinT), stride, nHeads, hd, pos0, 1, T)
				return []output{fout("x", x)}
			}})
	}
	{
		const nKV, hd, maxCtx, pos0, T = 2, 64, 16, 5, 4
		srcStride := nKV*hd + 3
		src := randFloats(r, T*srcStride, 1)
		cs = append(cs, opCase{name: "KVAppend", field: "KVAppend", exact: true,
			has: func(s *kern.Set) bool { return s.KVAppend != nil },
			run: func(s *kern.Set) []output {
				c := f32s(nKV * maxCtx * hd)
				s.KVAppend(p(c), p(src), srcStride, nKV, hd, maxCtx, pos0, 0, T)
				return []output{{name: "cache", b: bytesOf(c), exact: true}}
			}})
	}

	// ---- attention: decode-like (T=1, head_dim 64) and prefill-like with an odd head size ----
	for _, a := range []struct{ nHeads, nKV, hd, maxCtx, pos0, T, h0, h1 int }{
		{4, 2, 64, 300, 257, 1, 0, 4},
		{4, 2, 64, 40, 20, 3, 1, 4},
		{6, 3, 40, 30, 9, 5, 0, 5},
	} {
		a := a
		qStride := a.nHeads*a.hd + 8
		q := randFloats(r, a.T*qStride, 1)
		kc := randFloats(r, a.nKV*a.maxCtx*a.hd, 1)
		vc := randFloats(r, a.nKV*a.maxCtx*a.hd, 1)
		cs = append(cs, opCase{name: "Attention/hd" + strconv.Itoa(a.hd) + "/T" + strconv.Itoa(a.T), field: "Attention",
			has: func(s *kern.Set) bool { return s.Attention != nil },
			run: func(s *kern.Set) []output {
				out := f32s(a.T * a.nHeads * a.hd)
				scratch := make([]float32, a.maxCtx)
				s.Attention(p(out), p(q), p(kc), p(vc), p(scratch), a.nHeads, a.nKV, a.hd, a.maxCtx, qStride, a.pos0, a.T, a.h0, a.h1)
				return []output{fout("out", out)}
			}})
	}

	// ---- embedding ----
	{
		const edim, nrows, T = 256, 10, 6
		table := quantQ8(randFloats(r, nrows*edim, 1))
		ids := []int32{3, 9, 0, 3, 7, 1}
		cs = append(cs, opCase{name: "EmbedQ8_0", field: "EmbedQ8_0", exact: true,
			has: func(s *kern.Set) bool { return s.EmbedQ8_0 != nil },
			run: func(s *kern.Set) []output {
				out := f32s(T * edim)
				s.EmbedQ8_0(p(out), p(table), p(ids), edim, 1, T)
				return []output{{name: "out", b: bytesOf(out), exact: true}}
			}})
	}

	// ---- streaming read ----
	sr := randFloats(r, 1003, 1)
	cs = append(cs, opCase{name: "StreamRead", field: "StreamRead",
		has: func(s *kern.Set) bool { return s.StreamRead != nil },
		run: func(s *kern.Set) []output {
			out := f32s(1)
			s.StreamRead(p(out), p(sr), len(sr))
			return []output{fout("sum", out)}
		}})
	return cs
}
