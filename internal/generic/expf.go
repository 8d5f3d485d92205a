package generic

import "math"

// Constants of krt_expf (csrc/krt_common.h); float32 constants round like C's f suffix.
const (
	expHi float32 = 88.3762626647949
	expLo float32 = -87.3365447504019
	log2e float32 = 1.44269504088896341
	ln2Hi float32 = 0.693359375
	ln2Lo float32 = -2.12194440e-4
	expP0 float32 = 1.9875691500e-4
	expP1 float32 = 1.3981999507e-3
	expP2 float32 = 8.3334519073e-3
	expP3 float32 = 4.1665795894e-2
	expP4 float32 = 1.6666665459e-1
	expP5 float32 = 5.0000001201e-1
)

// Expf is krt_expf ported operation for operation (each product rounded, no FMA), so the
// generic backend's softmax and SiLU agree with the C _ref kernels bit for bit: e^x as 2^n * e^r
// with |r| <= ln2/2 and a degree-6 polynomial; 0 below expLo, +Inf above expHi, NaN stays NaN.
func Expf(x float32) float32 {
	if x != x {
		return x
	}
	if x > expHi {
		x = expHi + 1
	}
	if x < expLo {
		return 0
	}
	fx := float32(x*log2e) + 0.5
	n := float32(int32(fx))
	if n > fx { // floor
		n--
	}
	r := x - float32(n*ln2Hi)
	r = r - float32(n*ln2Lo)
	p := expP0
	p = float32(p*r) + expP1
	p = float32(p*r) + expP2
	p = float32(p*r) + expP3
	p = float32(p*r) + expP4
	p = float32(p*r) + expP5
	p = float32(float32(p*r)*r) + r + 1
	ni := int32(n)
	if ni > 127 { // overflow
		return float32(math.Inf(1))
	}
	return p * math.Float32frombits(uint32(ni+127)<<23)
}
