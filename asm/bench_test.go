//go:build amd64 && !noasm

package asm

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// Per-call overhead. Run:
//
//	go test -run '^$' -bench 'Call' -benchtime 200ms ./asm/
//
// go-*: a Go function that is not inlined; asm-*: functions generated from
// tools/asmgen/c/noop.c; cgo-* (with cgo, bench_cgo_test.go): the same C called through cgo;
// *-set-add0: an Add over an empty range through a kern.Set field (func value, argument
// conversion, the kernel's prologue), i.e. what the kernelrt API pays per call.

//go:noinline
func goNoop() {}

//go:noinline
func goNoopArgs(out, a, b unsafe.Pointer, n, i0, i1 int) { *(*float32)(out) = float32(i0) }

type callBench struct {
	name string
	fn   func(out, a, b unsafe.Pointer, n, i0, i1 int)
}

// cgoCalls is filled by bench_cgo_test.go when cgo is built in.
var cgoCalls []callBench

func BenchmarkCall(b *testing.B) {
	buf := make([]float32, 16)
	out := unsafe.Pointer(&buf[0])
	calls := []callBench{
		{"go-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { goNoop() }},
		{"go-noop-args", goNoopArgs},
		{"asm-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { _krt_noop() }},
		{"asm-noop-args", _krt_noop_args},
	}
	calls = append(calls, cgoCalls...)
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.fn(out, out, out, 16, i, 16)
			}
		})
	}
	for _, backend := range []string{"asm", "cgo"} {
		s, err := kern.Lookup(backend, cpu.Best())
		if err != nil {
			continue
		}
		b.Run(backend+"-set-add0", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s.Add(out, out, out, 0, 0)
			}
		})
	}
}

// opBench prepares one op at one size and returns the call to time and the bytes it reads
// and writes (for b.SetBytes).
type opBench struct {
	name  string
	setup func(r *rand.Rand) (run func(s *kern.Set), has func(s *kern.Set) bool, bytes int)
}

func opBenches() []opBench {
	gemv := func(rows, cols int, q5 bool) opBench {
		name := "GemvQ8_0"
		if q5 {
			name = "GemvQ5_0"
		}
		return opBench{name + "-" + strconv.Itoa(rows) + "x" + strconv.Itoa(cols), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			wf := randFloats(r, rows*cols, 0.05)
			w := quantQ8(wf)
			if q5 {
				w = quantQ5(wf)
			}
			x := quantQ8(randFloats(r, cols, 1))
			y := make([]float32, rows)
			if q5 {
				return func(s *kern.Set) { s.GemvQ5_0(p(y), p(w), p(x), nil, cols, 0, rows) },
					func(s *kern.Set) bool { return s.GemvQ5_0 != nil }, len(w) + len(x) + 4*rows
			}
			return func(s *kern.Set) { s.GemvQ8_0(p(y), p(w), p(x), nil, cols, 0, rows) },
				func(s *kern.Set) bool { return s.GemvQ8_0 != nil }, len(w) + len(x) + 4*rows
		}}
	}
	gemvF := func(rows, cols int) opBench {
		return opBench{"GemvQ8_0F32-" + strconv.Itoa(rows) + "x" + strconv.Itoa(cols), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			w := quantQ8(randFloats(r, rows*cols, 0.05))
			x := randFloats(r, cols, 1)
			xq := make([]byte, cols/qk*q8Size)
			y := make([]float32, rows)
			return func(s *kern.Set) { s.GemvQ8_0F32(p(y), p(w), p(x), p(xq), nil, cols, 0, rows) },
				func(s *kern.Set) bool { return s.GemvQ8_0F32 != nil }, len(w) + 4*cols + 4*rows
		}}
	}
	gemvF32 := func(rows, cols int) opBench {
		return opBench{"GemvF32-" + strconv.Itoa(rows) + "x" + strconv.Itoa(cols), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			w := randFloats(r, rows*cols, 0.05)
			x := randFloats(r, cols, 1)
			y := make([]float32, rows)
			return func(s *kern.Set) { s.GemvF32(p(y), p(w), p(x), cols, 0, rows) },
				func(s *kern.Set) bool { return s.GemvF32 != nil }, 4 * (rows*cols + cols + rows)
		}}
	}
	gemm := func(rows, cols, T int) opBench {
		return opBench{"GemmQ8_0-" + strconv.Itoa(rows) + "x" + strconv.Itoa(cols) + "xT" + strconv.Itoa(T), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			w := quantQ8(randFloats(r, rows*cols, 0.05))
			x := quantQ8(randFloats(r, T*cols, 1))
			y := make([]float32, T*rows)
			return func(s *kern.Set) { s.GemmQ8_0(p(y), p(w), p(x), nil, rows, cols, T, 0, rows) },
				func(s *kern.Set) bool { return s.GemmQ8_0 != nil }, len(w) + len(x) + 4*T*rows
		}}
	}
	quant := func(n int) opBench {
		return opBench{"QuantizeQ8_0-" + strconv.Itoa(n), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			x := randFloats(r, n, 1)
			q := make([]byte, n/qk*q8Size)
			return func(s *kern.Set) { s.QuantizeQ8_0(p(q), p(x), 0, n/qk) },
				func(s *kern.Set) bool { return s.QuantizeQ8_0 != nil }, 4*n + len(q)
		}}
	}
	dequant := func(n int) opBench {
		return opBench{"DequantizeQ5_0-" + strconv.Itoa(n), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			q := quantQ5(randFloats(r, n, 1))
			y := make([]float32, n)
			return func(s *kern.Set) { s.DequantizeQ5_0(p(y), p(q), 0, n/qk) },
				func(s *kern.Set) bool { return s.DequantizeQ5_0 != nil }, 4*n + len(q)
		}}
	}
	rms := func(dim, T int) opBench {
		return opBench{"RMSNorm-" + strconv.Itoa(dim) + "xT" + strconv.Itoa(T), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			x := randFloats(r, dim*T, 1)
			w := randFloats(r, dim, 1)
			y := make([]float32, dim*T)
			return func(s *kern.Set) { s.RMSNorm(p(y), p(x), p(w), 1e-6, dim, 0, T) },
				func(s *kern.Set) bool { return s.RMSNorm != nil }, 4 * (2*dim*T + dim)
		}}
	}
	softmax := func(cols, rows int) opBench {
		return opBench{"Softmax-" + strconv.Itoa(cols) + "x" + strconv.Itoa(rows), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			x := randFloats(r, cols*rows, 2)
			return func(s *kern.Set) { s.Softmax(p(x), nil, cols, 0, rows) },
				func(s *kern.Set) bool { return s.Softmax != nil }, 8 * cols * rows
		}}
	}
	swiglu := func(n int) opBench {
		return opBench{"SwiGLU-" + strconv.Itoa(n), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			g, u, y := randFloats(r, n, 3), randFloats(r, n, 1), make([]float32, n)
			return func(s *kern.Set) { s.SwiGLU(p(y), p(g), p(u), 0, n) },
				func(s *kern.Set) bool { return s.SwiGLU != nil }, 12 * n
		}}
	}
	add := func(n int) opBench {
		return opBench{"Add-" + strconv.Itoa(n), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			a, c, y := randFloats(r, n, 1), randFloats(r, n, 1), make([]float32, n)
			return func(s *kern.Set) { s.Add(p(y), p(a), p(c), 0, n) },
				func(s *kern.Set) bool { return s.Add != nil }, 12 * n
		}}
	}
	rope := func(nHeads, hd, T int) opBench {
		return opBench{"RopeNeox-" + strconv.Itoa(nHeads) + "x" + strconv.Itoa(hd) + "xT" + strconv.Itoa(T), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			const pos0 = 100
			x := randFloats(r, T*nHeads*hd, 1)
			cosT := randFloats(r, (pos0+T)*hd/2, 0.5)
			sinT := randFloats(r, (pos0+T)*hd/2, 0.5)
			return func(s *kern.Set) { s.RopeNeox(p(x), p(cosT), p(sinT), nHeads*hd, nHeads, hd, pos0, 0, T) },
				func(s *kern.Set) bool { return s.RopeNeox != nil }, 8*T*nHeads*hd + 4*T*hd
		}}
	}
	kv := func(nKV, hd, T int) opBench {
		return opBench{"KVAppend-" + strconv.Itoa(nKV) + "x" + strconv.Itoa(hd) + "xT" + strconv.Itoa(T), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			const maxCtx, pos0 = 1024, 10
			src := randFloats(r, T*nKV*hd, 1)
			c := make([]float32, nKV*maxCtx*hd)
			return func(s *kern.Set) { s.KVAppend(p(c), p(src), nKV*hd, nKV, hd, maxCtx, pos0, 0, T) },
				func(s *kern.Set) bool { return s.KVAppend != nil }, 8 * T * nKV * hd
		}}
	}
	attn := func(ctx int) opBench {
		return opBench{"Attention-14x2x64-ctx" + strconv.Itoa(ctx), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			const nHeads, nKV, hd = 14, 2, 64
			maxCtx := ctx
			q := randFloats(r, nHeads*hd, 1)
			kc := randFloats(r, nKV*maxCtx*hd, 1)
			vc := randFloats(r, nKV*maxCtx*hd, 1)
			out := make([]float32, nHeads*hd)
			scratch := make([]float32, maxCtx)
			return func(s *kern.Set) {
					s.Attention(p(out), p(q), p(kc), p(vc), p(scratch), nHeads, nKV, hd, maxCtx, nHeads*hd, ctx-1, 1, 0, nHeads)
				},
				func(s *kern.Set) bool { return s.Attention != nil }, 8 * nKV * ctx * hd
		}}
	}
	embed := func(dim, T int) opBench {
		return opBench{"EmbedQ8_0-" + strconv.Itoa(dim) + "xT" + strconv.Itoa(T), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			const rows = 64
			table := quantQ8(randFloats(r, rows*dim, 1))
			ids := make([]int32, T)
			for i := range ids {
				ids[i] = int32(r.IntN(rows))
			}
			out := make([]float32, T*dim)
			return func(s *kern.Set) { s.EmbedQ8_0(p(out), p(table), p(ids), dim, 0, T) },
				func(s *kern.Set) bool { return s.EmbedQ8_0 != nil }, T * (4*dim + dim/qk*q8Size)
		}}
	}
	stream := func(n int) opBench {
		return opBench{"StreamRead-" + strconv.Itoa(n), func(r *rand.Rand) (func(*kern.Set), func(*kern.Set) bool, int) {
			x := randFloats(r, n, 1)
			out := make([]float32, 1)
			return func(s *kern.Set) { s.StreamRead(p(out), p(x), n) },
				func(s *kern.Set) bool { return s.StreamRead != nil }, 4 * n
		}}
	}
	return []opBench{
		// decode sizes (Qwen2-0.5B-like: dim 896, FFN 4864, 14 heads / 2 KV heads of 64)
		quant(896), dequant(896), gemv(64, 896, false), gemv(64, 896, true), gemvF(64, 896),
		gemvF32(64, 896), gemm(64, 896, 4), rms(896, 1), softmax(512, 1), swiglu(4864), add(896),
		rope(14, 64, 1), kv(2, 64, 1), attn(512), embed(896, 1), stream(896),
		// large sizes
		quant(896 * 64), dequant(896 * 64), gemv(4864, 896, false), gemv(4864, 896, true),
		gemvF(4864, 896), gemvF32(1024, 896), gemm(512, 896, 64), rms(896, 64), softmax(4096, 14),
		swiglu(4864 * 16), add(896 * 64), rope(14, 64, 64), kv(2, 64, 64), attn(4096),
		embed(896, 64), stream(1 << 20),
	}
}

// BenchmarkOps times every op at a decode size and a large size, per backend and variant:
//
//	go test -run '^$' -bench 'Ops/.*/(asm|cgo)-avx512' -benchtime 200ms ./asm/
func BenchmarkOps(b *testing.B) {
	for _, ob := range opBenches() {
		run, has, nbytes := ob.setup(rand.New(rand.NewPCG(3, 4)))
		b.Run(ob.name, func(b *testing.B) {
			for _, backend := range []string{"asm", "cgo"} {
				for _, v := range cpu.Supported() {
					s, err := kern.Lookup(backend, v)
					if err != nil || !has(s) {
						continue
					}
					b.Run(backend+"-"+v.String(), func(b *testing.B) {
						b.SetBytes(int64(nbytes))
						for i := 0; i < b.N; i++ {
							run(s)
						}
					})
				}
			}
		})
	}
}

// TestCallOverhead prints the per-call cost of BenchmarkCall's calls as the fastest of 25
// bursts of 100k calls each, which survives a machine shared with other work better than the
// benchmark's mean. It only runs when asked:
//
//	KRT_ASM_VS_CGO=1 go test -run TestCallOverhead -v ./asm/
func TestCallOverhead(t *testing.T) {
	if os.Getenv("KRT_ASM_VS_CGO") == "" {
		t.Skip("set KRT_ASM_VS_CGO=1 to run")
	}
	buf := make([]float32, 16)
	out := unsafe.Pointer(&buf[0])
	calls := []callBench{
		{"go-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { goNoop() }},
		{"go-noop-args", goNoopArgs},
		{"asm-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { _krt_noop() }},
		{"asm-noop-args", _krt_noop_args},
	}
	calls = append(calls, cgoCalls...)
	for _, backend := range []string{"asm", "cgo"} {
		if s, err := kern.Lookup(backend, cpu.Best()); err == nil {
			calls = append(calls, callBench{backend + "-set-add0 (" + s.Name() + ")",
				func(out, a, b unsafe.Pointer, _, _, _ int) { s.Add(out, a, b, 0, 0) }})
		}
	}
	const n = 100000
	t.Logf("%-28s %10s", "call", "ns/call")
	for _, c := range calls {
		best := math.Inf(1)
		for r := 0; r < 25; r++ {
			st := time.Now()
			for i := 0; i < n; i++ {
				c.fn(out, out, out, 16, i, 16)
			}
			best = math.Min(best, float64(time.Since(st).Nanoseconds())/n)
		}
		t.Logf("%-28s %10.2f", c.name, best)
	}
}
