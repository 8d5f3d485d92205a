package generic

import "math"

// FP16ToFP32 converts an IEEE half to single precision exactly, like krt_fp16_to_fp32 in
// csrc/krt_common.h (NaN payloads are shifted across unchanged, not quieted).
func FP16ToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	var bits uint32
	switch {
	case exp == 0x1f: // Inf / NaN
		bits = sign | 0x7f800000 | man<<13
	case exp != 0: // normal
		bits = sign | (exp+112)<<23 | man<<13
	case man == 0: // zero
		bits = sign
	default: // subnormal: normalise
		shifts := uint32(0)
		for man&0x400 == 0 {
			man <<= 1
			shifts++
		}
		man &= 0x3ff
		bits = sign | (113-shifts)<<23 | man<<13
	}
	return math.Float32frombits(bits)
}

// FP32ToFP16 converts a single to an IEEE half, rounding to nearest even, like
// krt_fp32_to_fp16 and F16C's vcvtps2ph with immediate 0. NaN stays a quiet NaN.
func FP32ToFP16(f float32) uint16 {
	x := math.Float32bits(f)
	sign := (x >> 16) & 0x8000
	absx := x & 0x7fffffff
	if absx >= 0x7f800000 { // Inf or NaN
		if absx > 0x7f800000 {
			return uint16(sign | 0x7c00 | 0x200 | (absx>>13)&0x3ff)
		}
		return uint16(sign | 0x7c00)
	}
	if absx >= 0x477ff000 { // rounds to >= 65520: overflow to Inf
		return uint16(sign | 0x7c00)
	}
	if absx < 0x38800000 { // below the smallest normal half: subnormal or zero
		if absx < 0x33000000 { // < 2^-25 rounds to 0
			return uint16(sign)
		}
		e := absx >> 23
		m := absx&0x7fffff | 0x800000
		shift := 126 - e // 14..24
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 != 0) {
			half++
		}
		return uint16(sign | half)
	}
	r := absx + 0xfff + (absx>>13)&1 - 0x38000000 // rebias, round to nearest even
	return uint16(sign | r>>13)
}
