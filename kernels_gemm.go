package kernelrt

// The prefill GEMM: T tokens of Q8_0 activations through a Q8_0 or Q5_0 weight matrix in one
// call (the other types' GEMMs are in kernels_quant.go). Running T GEMVs would read every weight T times; the kernels repack a tile of weight
// rows once and reuse it from L1 for a block of up to 128 tokens (see csrc/gemm.c).

// GemmQ8_0 computes, for every token t in [0, tokens) and row r in [0, rows),
//
//	y[t*rows + r] = sum_b fp32(d_w[r,b]) * fp32(d_x[t,b]) * sum_j w[r,b,j]*x[t,b,j]  (+ bias[r])
//
// for a rows x cols Q8_0 matrix w (row-major, cols/32 blocks a row) and tokens rows of cols/32
// Q8_0 blocks x (token t's blocks at x[t*cols/32:]). y is tokens x rows floats. A nil bias means
// none. Per (t, r) the blocks are summed in order in float32, every product rounded (no FMA),
// so every backend and variant returns the same bits, and a token's row equals the scalar GEMV
// of that token (the SIMD GEMVs agree to a few ulp). y must not overlap w, x or bias.
//
// Cost: each weight block is repacked once per block of up to 128 tokens, then reused by all of
// them; at T = 1 that repack makes GemvQ8_0 about twice as fast, at T = 2 they are even, and from
// T = 3 the GEMM wins (about 5x at T = 128).
//
//kernelrt:api GemmQ8_0
func gemmQ8_0(rt *Runtime, y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ8_0", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ8_0, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ8_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// GemmQ5_0 is GemmQ8_0 with Q5_0 weights, whose quants count as q-16.
//
//kernelrt:api GemmQ5_0
func gemmQ5_0(rt *Runtime, y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ5_0", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ5_0, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ5_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// checkGemm checks y = W X (+ bias) for tokens tokens: rows, cols (a positive multiple of the
// block size, 32 or 256) and tokens positive with rows*cols, tokens*rows and tokens*cols fitting
// an int; y exactly tokens*rows floats, w rows*cols/qk blocks, x tokens*cols/qk blocks, bias nil
// or rows floats; y not overlapping w, x or bias. The serial functions and the Runtime's
// dispatch wrappers share it.
func checkGemm[B block, X actBlock](fn string, y []float32, w []B, x []X, bias []float32, rows, cols, tokens int) error {
	return checkMatmul(fn, y, w, x, bias, rows, cols, tokens, true)
}

// checkMatmul is the check GEMV (one token) and GEMM share; gemm selects the formulas its
// messages give for len(y) and len(x) (GEMV: rows, cols/qk; GEMM: tokens*rows, tokens*cols/qk).
// The block size qk is B's (w) and X's (x), 32 or 256.
func checkMatmul[B block, X actBlock](fn string, y []float32, w []B, x []X, bias []float32, rows, cols, tokens int, gemm bool) error {
	qk, qx := blockWeights[B](), blockWeights[X]()
	f := formulasFor(qk)
	yLen, xLen := "rows", f.xGemv
	if gemm {
		yLen, xLen = "tokens*rows", f.xGemm
	}
	n, err := checkMatrix(fn, rows, cols, qk)
	if err != nil {
		return err
	}
	if err := checkPositive(fn, "tokens", tokens); err != nil {
		return err
	}
	ny, ok := mulOK(tokens, rows)
	if !ok {
		return argErr(fn, "tokens", "tokens*rows = %d*%d overflows int", tokens, rows)
	}
	nx, ok := mulOK(tokens, cols/qx)
	if !ok {
		return argErr(fn, "tokens", "%s = %d*%d overflows int", f.xGemm, tokens, cols/qx)
	}
	if err := checkLenF(fn, "y", y, yLen, ny, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "w", w, f.w, n/qk, "blocks"); err != nil {
		return err
	}
	if err := checkLenF(fn, "x", x, xLen, nx, "blocks"); err != nil {
		return err
	}
	if err := checkOptLenF(fn, "bias", bias, "rows", rows, "floats"); err != nil {
		return err
	}
	ys := spanOf(y)
	if err := checkNoOverlap(fn, "y", "w", ys, spanOf(w)); err != nil {
		return err
	}
	if err := checkNoOverlap(fn, "y", "x", ys, spanOf(x)); err != nil {
		return err
	}
	return checkNoOverlap(fn, "y", "bias", ys, spanOf(bias))
}
