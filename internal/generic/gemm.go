package generic

import (
	"github.com/kernelrt/kernelrt/internal/kern"
)

// The prefill GEMM: pure-Go ports of krt_gemm_q8_0_ref and krt_gemm_q5_0_ref (csrc/gemm.c).
// Per (token t, row r), in this order and rounding every step to float32 (the explicit
// conversions stop the compiler from fusing into an FMA), exactly like every C variant:
//
//	acc = 0; for each block b in order: acc = acc + float32(fp32(d_w)*fp32(d_x)) * float32(isum_b)
//	y[t*rows+r] = acc (+ bias[r])

// GemmQ8_0 is krt_gemm_q8_0_ref: rows [r0, r1) of every token.
func GemmQ8_0(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qk
	ys := f32(y, T*rows)
	ws := q8s(w, rows*nb)
	xs := q8s(x, T*nb)
	var bs []float32
	if bias != nil {
		bs = f32(bias, rows)
	}
	for t := 0; t < T; t++ {
		xt := xs[t*nb : (t+1)*nb]
		for r := r0; r < r1; r++ {
			wr := ws[r*nb : (r+1)*nb]
			acc := float32(0)
			for b := range wr {
				wb, xb := &wr[b], &xt[b]
				isum := int32(0)
				for j := 0; j < qk; j++ {
					isum += int32(wb.qs[j]) * int32(xb.qs[j])
				}
				s := scalePoison(float32(FP16ToFP32(wb.d) * FP16ToFP32(xb.d)))
				p := float32(s * float32(isum))
				acc = acc + p
			}
			if bs != nil {
				acc = acc + bs[r]
			}
			ys[t*rows+r] = acc
		}
	}
}

// GemmQ5_0 is krt_gemm_q5_0_ref: rows [r0, r1) of every token.
func GemmQ5_0(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qk
	ys := f32(y, T*rows)
	ws := q5s(w, rows*nb)
	xs := q8s(x, T*nb)
	var bs []float32
	if bias != nil {
		bs = f32(bias, rows)
	}
	for t := 0; t < T; t++ {
		xt := xs[t*nb : (t+1)*nb]
		for r := r0; r < r1; r++ {
			wr := ws[r*nb : (r+1)*nb]
			acc := float32(0)
			for b := range wr {
				wb, xb := &wr[b], &xt[b]
				qh := uint32(wb.qh[0]) | uint32(wb.qh[1])<<8 | uint32(wb.qh[2])<<16 | uint32(wb.qh[3])<<24
				isum := int32(0)
				for j := 0; j < qk/2; j++ {
					lo := int32(wb.qs[j]&0x0f|uint8(qh>>uint(j)&1)<<4) - 16
					hi := int32(wb.qs[j]>>4|uint8(qh>>uint(j+16)&1)<<4) - 16
					isum += lo*int32(xb.qs[j]) + hi*int32(xb.qs[j+qk/2])
				}
				s := scalePoison(float32(FP16ToFP32(wb.d) * FP16ToFP32(xb.d)))
				p := float32(s * float32(isum))
				acc = acc + p
			}
			if bs != nil {
				acc = acc + bs[r]
			}
			ys[t*rows+r] = acc
		}
	}
}
