package kernelrt

import "testing"

// Single-thread throughput of the decoder ops on Qwen2-0.5B shapes, through the public
// functions (argument checks included), for every backend x variant:
//
//	go test -run '^$' -bench 'SwiGLU|BenchmarkAdd|Rope|KVAppend|Attention|Embed' -benchtime 200x
//
// Sub-benchmarks: backend/variant/{decode,prefill}. decode is one token (attention against a
// cache of 512 positions); prefill is 128 tokens from position 0 (attention causal over them).
// SetBytes counts the floats each op must read and write once (so MB/s is effective bandwidth).

const opsBenchPrefill = 128

// benchOps runs fn(tokens) as sub-benchmarks for each set implementing op, at decode (1 token)
// and prefill sizes; bytes(tokens) is the memory traffic per call.
func benchOps(b *testing.B, op string, bytes func(tokens int) int64, setup func(tokens int) func() error) {
	for _, s := range allSets() {
		if !hasOp(s, op) {
			continue
		}
		for _, mode := range []struct {
			name   string
			tokens int
		}{{"decode", 1}, {"prefill", opsBenchPrefill}} {
			run := setup(mode.tokens)
			b.Run(s.Name()+"/"+mode.name, func(b *testing.B) {
				withSet(s, func() {
					b.SetBytes(bytes(mode.tokens))
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

func BenchmarkSwiGLU(b *testing.B) {
	rng := newRand(201)
	benchOps(b, "SwiGLU", func(T int) int64 { return int64(T) * qwenInter * 12 }, func(T int) func() error {
		gate, up, out := randF32(rng, T*qwenInter, 8), randF32(rng, T*qwenInter, 2), make([]float32, T*qwenInter)
		return func() error { return SwiGLU(out, gate, up) }
	})
}

func BenchmarkAdd(b *testing.B) {
	rng := newRand(202)
	benchOps(b, "Add", func(T int) int64 { return int64(T) * qwenHidden * 12 }, func(T int) func() error {
		x, y := randF32(rng, T*qwenHidden, 8), randF32(rng, T*qwenHidden, 2)
		return func() error { return Add(x, x, y) }
	})
}

func BenchmarkRopeNeoX(b *testing.B) {
	rng := newRand(203)
	tab, err := NewRopeTable(qwenHeadDim, 4096, 1e6)
	if err != nil {
		b.Fatal(err)
	}
	// q heads of a fused QKV buffer, as the model runs it.
	benchOps(b, "RopeNeox", func(T int) int64 { return int64(T) * qwenHidden * 8 }, func(T int) func() error {
		x := randF32(rng, (T-1)*qwenQKVWidth+qwenHidden, 2)
		return func() error { return RopeNeoX(x, tab, T, qwenHeads, qwenHeadDim, qwenQKVWidth, 300) }
	})
}

func BenchmarkKVAppend(b *testing.B) {
	rng := newRand(204)
	const maxCtx = 1024
	kv := qwenKVHeads * qwenHeadDim
	benchOps(b, "KVAppend", func(T int) int64 { return int64(T) * int64(kv) * 8 }, func(T int) func() error {
		cache := make([]float32, qwenKVHeads*maxCtx*qwenHeadDim)
		src := randF32(rng, (T-1)*qwenQKVWidth+kv, 1)
		return func() error { return KVAppend(cache, src, T, qwenQKVWidth, qwenKVHeads, qwenHeadDim, maxCtx, 500) }
	})
}

func BenchmarkAttention(b *testing.B) {
	rng := newRand(205)
	// decode: position 511 (cache of 512); prefill: 128 tokens causal from position 0. Bytes:
	// each KV head's K and V rows are read once for its whole group of query heads.
	for _, kind := range kvKinds {
		rowBytes := int64(qwenKVHeads * qwenHeadDim * [...]int{4, 2, 0}[kind])
		if kind == kvQ8 {
			rowBytes = qwenKVHeads * qwenHeadDim / QK * 34
		}
		b.Run(kind.String(), func(b *testing.B) {
			benchOps(b, attnOpName(kind), func(T int) int64 {
				if T == 1 {
					return 2 * 512 * rowBytes
				}
				return 2 * int64(T*(T+1)/2) * rowBytes
			}, func(T int) func() error {
				maxCtx, pos0 := 512, 511
				if T > 1 {
					maxCtx, pos0 = T, 0
				}
				c := newAttnCase(rng, kind, T, qwenHeads, qwenKVHeads, qwenHeadDim, maxCtx, pos0, qwenQKVWidth-qwenHidden)
				out, scratch := make([]float32, T*qwenHidden), make([]float32, AttnScratchFloats(qwenHeadDim))
				return func() error { return c.attention(Serial{}, out, scratch) }
			})
		})
	}
}

func BenchmarkEmbedQ8_0(b *testing.B) {
	rng := newRand(206)
	benchOps(b, "EmbedQ8_0", func(T int) int64 { return int64(T) * (qwenHidden*4 + qwenHidden/QK*34) }, func(T int) func() error {
		e := newEmbedCase(rng, qwenHidden, 4096, T)
		out := make([]float32, T*qwenHidden)
		return func() error { return EmbedQ8_0(out, e.table, e.ids, e.dim, e.vocab) }
	})
}
