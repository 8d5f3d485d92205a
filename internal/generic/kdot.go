package generic

import "github.com/kernelrt/kernelrt/internal/kern"

// Pure-Go ports of the _ref GEMV / GEMM of Q4_0 and Q5_1 (activations Q8_0) and Q4_K, Q5_K,
// Q6_K (activations Q8_K): csrc/gemv_k.c and csrc/gemm.c over the row dot products of
// csrc/krt_kdot.h, in the same operation order and rounding (GEMM of one token equals the GEMV).

// dotQ4_0 is krt_kd_q4_0: acc += (d_w*d_x) * sum_j (q_j-8)*x_j per block.
func dotQ4_0(w []blockQ4_0, x []blockQ8_0) float32 {
	acc := float32(0)
	for b := range x {
		isum := int32(0)
		for j := 0; j < qk; j++ {
			isum += (nib(&w[b].qs, j) - 8) * int32(x[b].qs[j])
		}
		s := scalePoison(float32(FP16ToFP32(w[b].d) * FP16ToFP32(x[b].d)))
		acc = acc + float32(s*float32(isum))
	}
	return acc
}

// dotQ5_1 is krt_kd_q5_1: acc += (d_w*d_x)*isum + m_w*(d_x*xsum) per block.
func dotQ5_1(w []blockQ5_1, x []blockQ8_0) float32 {
	acc := float32(0)
	for b := range x {
		isum, xsum := int32(0), int32(0)
		for j := 0; j < qk; j++ {
			isum += w[b].q5(j) * int32(x[b].qs[j])
			xsum += int32(x[b].qs[j])
		}
		dx := FP16ToFP32(x[b].d)
		p := float32(scalePoison(float32(FP16ToFP32(w[b].d)*dx)) * float32(isum))
		q := scalePoison(float32(FP16ToFP32(w[b].m) * float32(dx*float32(xsum))))
		acc = acc + (p + q)
	}
	return acc
}

// k45Sums returns a Q4_K / Q5_K super-block's sum_j sc_j*dot_j and sum_j m_j*(bsums[2j]+bsums[2j+1]).
func k45Sums(scales *[12]uint8, q func(int) int32, x *blockQ8K) (isum, msum int32) {
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, scales)
		dot := int32(0)
		for l := 32 * j; l < 32*j+32; l++ {
			dot += q(l) * int32(x.qs[l])
		}
		isum += int32(sc) * dot
		msum += int32(m) * (int32(x.bsums[2*j]) + int32(x.bsums[2*j+1]))
	}
	return isum, msum
}

// dotQ4K is krt_kd_q4_K: acc += (d*d_x)*isum - (dmin*d_x)*msum per super-block.
func dotQ4K(w []blockQ4K, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum, msum := k45Sums(&w[b].scales, w[b].q, &x[b])
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		c := scalePoison(float32(FP16ToFP32(w[b].dmin) * x[b].d))
		acc = acc + (float32(a*float32(isum)) - float32(c*float32(msum)))
	}
	return acc
}

// dotQ5K is krt_kd_q5_K, dotQ4K with 5-bit quants.
func dotQ5K(w []blockQ5K, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum, msum := k45Sums(&w[b].scales, w[b].q, &x[b])
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		c := scalePoison(float32(FP16ToFP32(w[b].dmin) * x[b].d))
		acc = acc + (float32(a*float32(isum)) - float32(c*float32(msum)))
	}
	return acc
}

// dotQ6K is krt_kd_q6_K: acc += (d*d_x) * sum_i sc_i * sum_l (q-32)*x per super-block.
func dotQ6K(w []blockQ6K, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum := int32(0)
		for i := 0; i < 16; i++ {
			dot := int32(0)
			for e := 16 * i; e < 16*i+16; e++ {
				dot += (w[b].q(e) - 32) * int32(x[b].qs[e])
			}
			isum += int32(w[b].scales[i]) * dot
		}
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		acc = acc + float32(a*float32(isum))
	}
	return acc
}

// rowsGemv runs dot over rows r0..r1 of a GEMV and adds the bias: krt_gemv_<t>_ref.
func rowsGemv(y, bias kern.P, r0, r1 int, dot func(r int) float32) {
	ys := f32(y, r1)
	for r := r0; r < r1; r++ {
		ys[r] = dot(r)
	}
	addBias(ys, bias, r0, r1)
}

// rowsGemm runs dot over tokens 0..T and rows r0..r1 of a GEMM: krt_gemm_<t>_ref.
func rowsGemm(y, bias kern.P, rows, T, r0, r1 int, dot func(t, r int) float32) {
	ys := f32(y, T*rows)
	var bs []float32
	if bias != nil {
		bs = f32(bias, rows)
	}
	for t := 0; t < T; t++ {
		for r := r0; r < r1; r++ {
			acc := dot(t, r)
			if bs != nil {
				acc = acc + bs[r]
			}
			ys[t*rows+r] = acc
		}
	}
}

// GemvQ4_0 is krt_gemv_q4_0_ref: rows [r0, r1).
func GemvQ4_0(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qk
	ws, xs := q40s(w, r1*nb), q8s(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ4_0(ws[r*nb:(r+1)*nb], xs) })
}

// GemvQ5_1 is krt_gemv_q5_1_ref: rows [r0, r1).
func GemvQ5_1(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qk
	ws, xs := q51s(w, r1*nb), q8s(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ5_1(ws[r*nb:(r+1)*nb], xs) })
}

// GemvQ4K is krt_gemv_q4_K_ref: rows [r0, r1).
func GemvQ4K(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q4Ks(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ4K(ws[r*nb:(r+1)*nb], xs) })
}

// GemvQ5K is krt_gemv_q5_K_ref: rows [r0, r1).
func GemvQ5K(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q5Ks(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ5K(ws[r*nb:(r+1)*nb], xs) })
}

// GemvQ6K is krt_gemv_q6_K_ref: rows [r0, r1).
func GemvQ6K(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q6Ks(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ6K(ws[r*nb:(r+1)*nb], xs) })
}

// GemmQ4_0 is krt_gemm_q4_0_ref: rows [r0, r1) of every token.
func GemmQ4_0(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qk
	ws, xs := q40s(w, rows*nb), q8s(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ4_0(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}

// GemmQ5_1 is krt_gemm_q5_1_ref: rows [r0, r1) of every token.
func GemmQ5_1(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qk
	ws, xs := q51s(w, rows*nb), q8s(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ5_1(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}

// GemmQ4K is krt_gemm_q4_K_ref: rows [r0, r1) of every token.
func GemmQ4K(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q4Ks(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ4K(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}

// GemmQ5K is krt_gemm_q5_K_ref: rows [r0, r1) of every token.
func GemmQ5K(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q5Ks(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ5K(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}

// GemmQ6K is krt_gemm_q6_K_ref: rows [r0, r1) of every token.
func GemmQ6K(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q6Ks(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ6K(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}
