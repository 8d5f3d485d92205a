package parity

import (
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
)

// The quantized weight types as the GEMV, GEMM and dequantization cases see them. The decoders
// read the bytes at the offsets ggml's block layouts define (ggml-common.h), not through
// kernelrt's Go structs, so they check those too.

// acts are a case's quantized activations: Q8_0 blocks (types of 32) or Q8_K super-blocks.
type acts struct {
	q8 []kernelrt.BlockQ8_0
	k  []kernelrt.BlockQ8K
}

// qtype is one quantized weight type.
type qtype struct {
	name string // ggml's name: "q4_K"
	qk   int    // values per block: 32 or 256
	size int    // bytes per block
	k    bool   // activations are Q8_K (else Q8_0)

	// randBlocks fills whole blocks with random content: every quant, finite scales of
	// realistic size (the case's relative metric makes their size irrelevant otherwise).
	randBlocks func(r *rng, b []byte)
	// decode writes one block's values as two parts, value j = s[j] + o[j]: the scaled quant
	// and the offset (min) term, each exactly representable in float32 (o is 0 without a min).
	decode func(b []byte, s, o []float64)

	gemvOp, gemmOp, deqOp kernelrt.Op
	gemvFn, gemmFn, deqFn string // Go names; a GEMV with a bias is gemvFn+"Bias"
	gemv                  func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error
	gemm                  func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error
	deq                   func(e exec, y []float32, w []byte) error
	// fused is the FP32-activation GEMV where the type has one (Q8_0, Q5_0).
	fusedOp kernelrt.Op
	fusedFn string
	fused   func(e exec, y []float32, w []byte, x, bias []float32, scratch []kernelrt.BlockQ8_0, rows, cols int) error
}

// blocks views b as blocks of B.
func blocks[B any](b []byte) []B {
	var z B
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*B)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

func le16(b []byte) uint16     { return uint16(b[0]) | uint16(b[1])<<8 }
func le32(b []byte) uint32     { return uint32(le16(b)) | uint32(le16(b[2:]))<<16 }
func put16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }

// nib32 is quant j of a block of 32 stored as 16 nibble bytes: low nibbles hold 0..15.
func nib32(qs []byte, j int) int {
	if j < 16 {
		return int(qs[j] & 15)
	}
	return int(qs[j-16] >> 4)
}

// scaleMin6 unpacks sub-block j's 6-bit scale and min from a Q4_K / Q5_K block's 12 bytes.
func scaleMin6(sc []byte, j int) (int, int) {
	if j < 4 {
		return int(sc[j] & 63), int(sc[j+4] & 63)
	}
	return int(sc[j+4]&15 | sc[j-4]>>6<<4), int(sc[j+4]>>4 | sc[j]>>6<<4)
}

// randScale is a random fp16 scale in [lo, hi), negative half the time when signed.
func randScale(r *rng, lo, hi float64, signed bool) uint16 {
	d := lo + (hi-lo)*r.unit()
	if signed && r.next()&1 == 1 {
		d = -d
	}
	return toF16(float32(d))
}

// randBlocksOf fills b with random bytes, then lets fix set each block's scale fields.
func randBlocksOf(size int, fix func(r *rng, blk []byte)) func(r *rng, b []byte) {
	return func(r *rng, b []byte) {
		r.fillBytes(b)
		for i := 0; i+size <= len(b); i += size {
			fix(r, b[i:i+size])
		}
	}
}

var (
	typeQ8_0 = &qtype{name: "q8_0", qk: 32, size: 34,
		randBlocks: randBlocksOf(34, func(r *rng, b []byte) { put16(b, randScale(r, 0.0005, 0.0025, false)) }),
		decode: func(b []byte, s, o []float64) {
			d := f16(le16(b))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(int8(b[2+j])), 0
			}
		},
		gemvOp: kernelrt.OpGemvQ8_0, gemmOp: kernelrt.OpGemmQ8_0, deqOp: kernelrt.OpDequantizeQ8_0,
		gemvFn: "GemvQ8_0", gemmFn: "GemmQ8_0", deqFn: "DequantizeQ8_0",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ8_0(y, blocks[kernelrt.BlockQ8_0](w), x.q8, rows, cols)
			}
			return e.GemvQ8_0Bias(y, blocks[kernelrt.BlockQ8_0](w), x.q8, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ8_0(y, blocks[kernelrt.BlockQ8_0](w), x.q8, bias, rows, cols, T)
		},
		deq:     func(e exec, y []float32, w []byte) error { return e.DequantizeQ8_0(y, blocks[kernelrt.BlockQ8_0](w)) },
		fusedOp: kernelrt.OpGemvQ8_0F32, fusedFn: "GemvQ8_0F32",
		fused: func(e exec, y []float32, w []byte, x, bias []float32, scratch []kernelrt.BlockQ8_0, rows, cols int) error {
			return e.GemvQ8_0F32(y, blocks[kernelrt.BlockQ8_0](w), x, bias, scratch, rows, cols)
		},
	}
	typeQ5_0 = &qtype{name: "q5_0", qk: 32, size: 22,
		randBlocks: randBlocksOf(22, func(r *rng, b []byte) { put16(b, randScale(r, 0.0005, 0.0025, true)) }),
		decode: func(b []byte, s, o []float64) {
			d := f16(le16(b))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(quantQ5_0(b, j)), 0
			}
		},
		gemvOp: kernelrt.OpGemvQ5_0, gemmOp: kernelrt.OpGemmQ5_0, deqOp: kernelrt.OpDequantizeQ5_0,
		gemvFn: "GemvQ5_0", gemmFn: "GemmQ5_0", deqFn: "DequantizeQ5_0",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ5_0(y, blocks[kernelrt.BlockQ5_0](w), x.q8, rows, cols)
			}
			return e.GemvQ5_0Bias(y, blocks[kernelrt.BlockQ5_0](w), x.q8, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ5_0(y, blocks[kernelrt.BlockQ5_0](w), x.q8, bias, rows, cols, T)
		},
		deq:     func(e exec, y []float32, w []byte) error { return e.DequantizeQ5_0(y, blocks[kernelrt.BlockQ5_0](w)) },
		fusedOp: kernelrt.OpGemvQ5_0F32, fusedFn: "GemvQ5_0F32",
		fused: func(e exec, y []float32, w []byte, x, bias []float32, scratch []kernelrt.BlockQ8_0, rows, cols int) error {
			return e.GemvQ5_0F32(y, blocks[kernelrt.BlockQ5_0](w), x, bias, scratch, rows, cols)
		},
	}
	typeQ4_0 = &qtype{name: "q4_0", qk: 32, size: 18,
		randBlocks: randBlocksOf(18, func(r *rng, b []byte) { put16(b, randScale(r, 0.001, 0.005, true)) }),
		decode: func(b []byte, s, o []float64) {
			d := f16(le16(b))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(quantQ4_0(b, j)), 0
			}
		},
		gemvOp: kernelrt.OpGemvQ4_0, gemmOp: kernelrt.OpGemmQ4_0, deqOp: kernelrt.OpDequantizeQ4_0,
		gemvFn: "GemvQ4_0", gemmFn: "GemmQ4_0", deqFn: "DequantizeQ4_0",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ4_0(y, blocks[kernelrt.BlockQ4_0](w), x.q8, rows, cols)
			}
			return e.GemvQ4_0Bias(y, blocks[kernelrt.BlockQ4_0](w), x.q8, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ4_0(y, blocks[kernelrt.BlockQ4_0](w), x.q8, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ4_0(y, blocks[kernelrt.BlockQ4_0](w)) },
	}
	// IQ4_NL: Q4_0's layout; the nibble indexes ggml's kvalues_iq4nl (written out here from
	// ggml-quants.c, not taken from kernelrt).
	typeIQ4_NL = &qtype{name: "iq4_nl", qk: 32, size: 18,
		randBlocks: randBlocksOf(18, func(r *rng, b []byte) { put16(b, randScale(r, 0.00005, 0.0003, true)) }),
		decode: func(b []byte, s, o []float64) {
			d := f16(le16(b))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(quantIQ4_NL(b, j)), 0
			}
		},
		gemvOp: kernelrt.OpGemvIQ4_NL, gemmOp: kernelrt.OpGemmIQ4_NL, deqOp: kernelrt.OpDequantizeIQ4_NL,
		gemvFn: "GemvIQ4_NL", gemmFn: "GemmIQ4_NL", deqFn: "DequantizeIQ4_NL",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvIQ4_NL(y, blocks[kernelrt.BlockIQ4_NL](w), x.q8, rows, cols)
			}
			return e.GemvIQ4_NLBias(y, blocks[kernelrt.BlockIQ4_NL](w), x.q8, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmIQ4_NL(y, blocks[kernelrt.BlockIQ4_NL](w), x.q8, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error {
			return e.DequantizeIQ4_NL(y, blocks[kernelrt.BlockIQ4_NL](w))
		},
	}
	// Q4_1 has no GEMV or GEMM (llama.cpp's quantizer no longer writes it): quantize and
	// dequantize only.
	typeQ4_1 = &qtype{name: "q4_1", qk: 32, size: 20,
		randBlocks: randBlocksOf(20, fixMin(15)),
		decode: func(b []byte, s, o []float64) {
			d, m := f16(le16(b)), f16(le16(b[2:]))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(quantQ4_1(b, j)), m
			}
		},
		deqOp: kernelrt.OpDequantizeQ4_1, deqFn: "DequantizeQ4_1",
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ4_1(y, blocks[kernelrt.BlockQ4_1](w)) },
	}
	typeQ5_1 = &qtype{name: "q5_1", qk: 32, size: 24,
		randBlocks: randBlocksOf(24, fixMin(31)),
		decode: func(b []byte, s, o []float64) {
			d, m := f16(le16(b)), f16(le16(b[2:]))
			for j := 0; j < 32; j++ {
				s[j], o[j] = d*float64(quantQ5_1(b, j)), m
			}
		},
		gemvOp: kernelrt.OpGemvQ5_1, gemmOp: kernelrt.OpGemmQ5_1, deqOp: kernelrt.OpDequantizeQ5_1,
		gemvFn: "GemvQ5_1", gemmFn: "GemmQ5_1", deqFn: "DequantizeQ5_1",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ5_1(y, blocks[kernelrt.BlockQ5_1](w), x.q8, rows, cols)
			}
			return e.GemvQ5_1Bias(y, blocks[kernelrt.BlockQ5_1](w), x.q8, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ5_1(y, blocks[kernelrt.BlockQ5_1](w), x.q8, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ5_1(y, blocks[kernelrt.BlockQ5_1](w)) },
	}
	typeQ4K = &qtype{name: "q4_K", qk: 256, size: 144, k: true,
		randBlocks: randBlocksOf(144, fixK45),
		decode:     func(b []byte, s, o []float64) { decodeK45(b, nil, b[16:144], s, o) },
		gemvOp:     kernelrt.OpGemvQ4K, gemmOp: kernelrt.OpGemmQ4K, deqOp: kernelrt.OpDequantizeQ4K,
		gemvFn: "GemvQ4K", gemmFn: "GemmQ4K", deqFn: "DequantizeQ4K",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ4K(y, blocks[kernelrt.BlockQ4K](w), x.k, rows, cols)
			}
			return e.GemvQ4KBias(y, blocks[kernelrt.BlockQ4K](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ4K(y, blocks[kernelrt.BlockQ4K](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ4K(y, blocks[kernelrt.BlockQ4K](w)) },
	}
	typeQ5K = &qtype{name: "q5_K", qk: 256, size: 176, k: true,
		randBlocks: randBlocksOf(176, fixK45),
		decode:     func(b []byte, s, o []float64) { decodeK45(b, b[16:48], b[48:176], s, o) },
		gemvOp:     kernelrt.OpGemvQ5K, gemmOp: kernelrt.OpGemmQ5K, deqOp: kernelrt.OpDequantizeQ5K,
		gemvFn: "GemvQ5K", gemmFn: "GemmQ5K", deqFn: "DequantizeQ5K",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ5K(y, blocks[kernelrt.BlockQ5K](w), x.k, rows, cols)
			}
			return e.GemvQ5KBias(y, blocks[kernelrt.BlockQ5K](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ5K(y, blocks[kernelrt.BlockQ5K](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ5K(y, blocks[kernelrt.BlockQ5K](w)) },
	}
	typeQ6K = &qtype{name: "q6_K", qk: 256, size: 210, k: true,
		randBlocks: randBlocksOf(210, func(r *rng, b []byte) { put16(b[208:], randScale(r, 0.00005, 0.0002, true)) }),
		decode: func(b []byte, s, o []float64) {
			ql, qh, sc, d := b[0:128], b[128:192], b[192:208], f16(le16(b[208:]))
			for e := 0; e < 256; e++ {
				h, k, l := e/128, e%128/32, e%32
				lo := ql[64*h+l+32*(k&1)]
				if k < 2 {
					lo &= 15
				} else {
					lo >>= 4
				}
				q := int(lo) | int(qh[32*h+l]>>(2*k)&3)<<4
				s[e], o[e] = d*float64(int8(sc[e/16]))*float64(q-32), 0
			}
		},
		gemvOp: kernelrt.OpGemvQ6K, gemmOp: kernelrt.OpGemmQ6K, deqOp: kernelrt.OpDequantizeQ6K,
		gemvFn: "GemvQ6K", gemmFn: "GemmQ6K", deqFn: "DequantizeQ6K",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ6K(y, blocks[kernelrt.BlockQ6K](w), x.k, rows, cols)
			}
			return e.GemvQ6KBias(y, blocks[kernelrt.BlockQ6K](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ6K(y, blocks[kernelrt.BlockQ6K](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ6K(y, blocks[kernelrt.BlockQ6K](w)) },
	}
	// Q2_K: ggml's block_q2_K (scales[16], qs[64], fp16 d, dmin): sub-block i of 16 has value
	// d*(scales[i]&15)*q - dmin*(scales[i]>>4), element e's quant in bits 2j of qs[32n+l]
	// (n = e/128, j = e%128/32, l = e%32), read here from ggml's layout independently.
	typeQ2K = &qtype{name: "q2_K", qk: 256, size: 84, k: true,
		randBlocks: randBlocksOf(84, func(r *rng, b []byte) {
			put16(b[80:], randScale(r, 0.0005, 0.002, false))
			put16(b[82:], randScale(r, 0.0005, 0.002, false))
		}),
		decode: func(b []byte, s, o []float64) {
			d, dmin := f16(le16(b[80:])), f16(le16(b[82:]))
			for e := 0; e < 256; e++ {
				n, j, l := e/128, e%128/32, e%32
				q := int(b[16+32*n+l]>>(2*j)) & 3
				sc := b[e/16]
				s[e], o[e] = d*float64(sc&15)*float64(q), -dmin*float64(sc>>4)
			}
		},
		gemvOp: kernelrt.OpGemvQ2K, gemmOp: kernelrt.OpGemmQ2K, deqOp: kernelrt.OpDequantizeQ2K,
		gemvFn: "GemvQ2K", gemmFn: "GemmQ2K", deqFn: "DequantizeQ2K",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ2K(y, blocks[kernelrt.BlockQ2K](w), x.k, rows, cols)
			}
			return e.GemvQ2KBias(y, blocks[kernelrt.BlockQ2K](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ2K(y, blocks[kernelrt.BlockQ2K](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ2K(y, blocks[kernelrt.BlockQ2K](w)) },
	}
	// IQ4_XS: ggml's block_iq4_xs (fp16 d, uint16 scales_h, scales_l[4], qs[128]): sub-block j
	// of 32 has value d*(ls-32)*kvalues_iq4nl[nibble], its 6-bit ls the nibble j%2 of
	// scales_l[j/2] below bits 2j..2j+1 of scales_h, its nibbles IQ4_NL's layout in
	// qs[16j:16j+16], read here from ggml's layout independently.
	typeIQ4_XS = &qtype{name: "iq4_xs", qk: 256, size: 136, k: true,
		randBlocks: randBlocksOf(136, func(r *rng, b []byte) { put16(b, randScale(r, 0.000005, 0.00003, true)) }),
		decode: func(b []byte, s, o []float64) {
			d, sh := f16(le16(b)), le16(b[2:])
			for e := 0; e < 256; e++ {
				j, l := e/32, e%32
				ls := int(b[4+j/2]>>(4*(j%2)))&15 | int(sh>>(2*j))&3<<4
				q := b[8+16*j+l%16]
				if l >= 16 {
					q >>= 4
				}
				s[e], o[e] = d*float64(ls-32)*float64(kvaluesIQ4NL[q&15]), 0
			}
		},
		gemvOp: kernelrt.OpGemvIQ4_XS, gemmOp: kernelrt.OpGemmIQ4_XS, deqOp: kernelrt.OpDequantizeIQ4_XS,
		gemvFn: "GemvIQ4_XS", gemmFn: "GemmIQ4_XS", deqFn: "DequantizeIQ4_XS",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvIQ4_XS(y, blocks[kernelrt.BlockIQ4_XS](w), x.k, rows, cols)
			}
			return e.GemvIQ4_XSBias(y, blocks[kernelrt.BlockIQ4_XS](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmIQ4_XS(y, blocks[kernelrt.BlockIQ4_XS](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error {
			return e.DequantizeIQ4_XS(y, blocks[kernelrt.BlockIQ4_XS](w))
		},
	}
	// Q3_K: ggml's block_q3_K (hmask[32], qs[64], scales[12], fp16 d): sub-block s of 16 has
	// value d*(sc-32)*q, its 6-bit sc the nibble s/8 of scales[s%8] below bits 2(s/4) of
	// scales[8+s%4], element e's q the two bits 2j of qs[32h+l] minus 4 where bit 4h+j of
	// hmask[l] is clear (h = e/128, j = e%128/32, l = e%32), read here from ggml's layout
	// independently.
	typeQ3K = &qtype{name: "q3_K", qk: 256, size: 110, k: true,
		randBlocks: randBlocksOf(110, func(r *rng, b []byte) { put16(b[108:], randScale(r, 0.00005, 0.0003, true)) }),
		decode: func(b []byte, s, o []float64) {
			d := f16(le16(b[108:]))
			for e := 0; e < 256; e++ {
				h, j, l, sb := e/128, e%128/32, e%32, e/16
				sc := int(b[96+sb%8]) & 15
				if sb >= 8 {
					sc = int(b[96+sb%8]) >> 4
				}
				sc |= int(b[104+sb%4]>>(2*(sb/4))) & 3 << 4
				q := int(b[32+32*h+l]>>(2*j)) & 3
				if b[l]>>(4*h+j)&1 == 0 {
					q -= 4
				}
				s[e], o[e] = d*float64(sc-32)*float64(q), 0
			}
		},
		gemvOp: kernelrt.OpGemvQ3K, gemmOp: kernelrt.OpGemmQ3K, deqOp: kernelrt.OpDequantizeQ3K,
		gemvFn: "GemvQ3K", gemmFn: "GemmQ3K", deqFn: "DequantizeQ3K",
		gemv: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols int) error {
			if bias == nil {
				return e.GemvQ3K(y, blocks[kernelrt.BlockQ3K](w), x.k, rows, cols)
			}
			return e.GemvQ3KBias(y, blocks[kernelrt.BlockQ3K](w), x.k, bias, rows, cols)
		},
		gemm: func(e exec, y []float32, w []byte, x acts, bias []float32, rows, cols, T int) error {
			return e.GemmQ3K(y, blocks[kernelrt.BlockQ3K](w), x.k, bias, rows, cols, T)
		},
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ3K(y, blocks[kernelrt.BlockQ3K](w)) },
	}
	// Q8_K is an activation type: dequantization only here (its quantizer has its own case).
	typeQ8K = &qtype{name: "q8_K", qk: 256, size: 292,
		randBlocks: randBlocksOf(292, func(r *rng, b []byte) {
			d := float32((0.0001 + 0.01*r.unit()))
			if r.next()&1 == 1 {
				d = -d
			}
			v := math.Float32bits(d)
			put16(b, uint16(v))
			put16(b[2:], uint16(v>>16))
		}),
		decode: func(b []byte, s, o []float64) {
			d := float64(math.Float32frombits(le32(b)))
			for j := 0; j < 256; j++ {
				s[j], o[j] = d*float64(int8(b[4+j])), 0
			}
		},
		deqOp: kernelrt.OpDequantizeQ8K, deqFn: "DequantizeQ8K",
		deq: func(e exec, y []float32, w []byte) error { return e.DequantizeQ8K(y, blocks[kernelrt.BlockQ8K](w)) },
	}
)

// fixMin sets a Q4_1 / Q5_1 block's d (positive, as (max-min)/nmax is) and m (a negative
// minimum of up to nmax steps, so values straddle zero as weights do).
func fixMin(nmax int) func(r *rng, b []byte) {
	return func(r *rng, b []byte) {
		d := 0.0005 + 0.002*r.unit()
		put16(b, toF16(float32(d)))
		put16(b[2:], toF16(float32(-d*float64(nmax)*r.unit())))
	}
}

// fixK45 sets a Q4_K / Q5_K super-block's d and dmin; the 6-bit scale and min codes stay random.
func fixK45(r *rng, b []byte) {
	put16(b, randScale(r, 0.00005, 0.0002, false))
	put16(b[2:], randScale(r, 0.00005, 0.0002, false))
}

// decodeK45 decodes a Q4_K (qh nil) or Q5_K super-block: sub-block j of 32 has value
// d*sc_j*q - dmin*m_j, its quants in the low (j even) or high (j odd) nibbles of
// qs[32*(j/2):], the fifth bit in bit j of qh[l].
func decodeK45(b, qh, qs []byte, s, o []float64) {
	d, dmin, sc := f16(le16(b)), f16(le16(b[2:])), b[4:16]
	for j := 0; j < 8; j++ {
		scj, mj := scaleMin6(sc, j)
		for l := 0; l < 32; l++ {
			q := int(qs[32*(j/2)+l])
			if j&1 == 0 {
				q &= 15
			} else {
				q >>= 4
			}
			if qh != nil {
				q |= int(qh[l]>>j&1) << 4
			}
			s[32*j+l], o[32*j+l] = d*float64(scj)*float64(q), -dmin*float64(mj)
		}
	}
}

// decodeAll decodes whole blocks of t into values (s + o, float64).
func (t *qtype) decodeAll(b []byte, out []float64) {
	s, o := make([]float64, t.qk), make([]float64, t.qk)
	for i := 0; i*t.size < len(b); i++ {
		t.decode(b[i*t.size:(i+1)*t.size], s, o)
		for j := range s {
			out[i*t.qk+j] = s[j] + o[j]
		}
	}
}

// actValues are the exact values of quantized activations: Q8_0 fp16(d)*q, Q8_K d*q.
func actValues(x acts, out []float64) {
	for b := range x.q8 {
		d := f16(x.q8[b].D)
		for j, q := range x.q8[b].Qs {
			out[b*32+j] = d * float64(q)
		}
	}
	for b := range x.k {
		d := float64(x.k[b].D)
		for j, q := range x.k[b].Qs {
			out[b*256+j] = d * float64(q)
		}
	}
}
