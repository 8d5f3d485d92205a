package sample

import "math"

var negInf = float32(math.Inf(-1))

// rng is SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014; the constants of Vigna's reference code): a 64-bit state advanced by the golden
// ratio and mixed by two xor-shift-multiply rounds. It is specified entirely by integer
// arithmetic, so a seed gives the same sequence on every platform and Go version, which
// math/rand does not promise.
type rng struct{ s uint64 }

// newRNG seeds the generator; every seed, 0 included, gives a full-period sequence.
func newRNG(seed uint64) rng { return rng{seed} }

// next returns the next 64 random bits.
func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a uniform number in [0, 1): the top 53 bits scaled by 2^-53.
func (r *rng) float64() float64 { return float64(r.next()>>11) * 0x1p-53 }

// exp is e^x to about 1e-12 relative for the x <= 0 the sampler passes (differences of a
// logit and the row's maximum, over the temperature). It is the sampler's own, not math.Exp,
// whose last bits differ between ports (amd64 has an assembly version): x = (32k + j) ln2/32
// + r with |r| <= ln2/64, e^x = 2^k * 2^(j/32) * e^r, with 2^(j/32) from a table built by
// square roots and products (both correctly rounded by IEEE 754) and e^r from a degree-5
// Taylor polynomial. Every product is converted explicitly, which per the Go spec forbids
// fusing it into an FMA, so the result is the same on every platform. Below -60 it returns
// 0: such a token's probability (< 1e-26 of the most likely one's) cannot change a draw.
func exp(x float64) float64 {
	if x < -60 {
		return 0
	}
	if x > 700 {
		return math.Inf(1)
	}
	t := float64(x*(32*math.Log2E)) + 0.5
	n := int(t) // truncates toward zero: floor for t >= 0, one more below
	if float64(n) > t {
		n--
	}
	r := x - float64(float64(n)*(math.Ln2/32))
	p := 1.0 / 120
	p = float64(p*r) + 1.0/24
	p = float64(p*r) + 1.0/6
	p = float64(p*r) + 0.5
	p = float64(p*r) + 1
	p = float64(p*r) + 1
	k, j := n>>5, n&31 // n = 32k + j, j in [0, 32)
	return float64(p*exp2Frac[j]) * math.Float64frombits(uint64(k+1023)<<52)
}

// exp2Frac[j] is 2^(j/32): the product of 2^(1/2^b) over the set bits of j/32, each root a
// chain of correctly rounded square roots, so the table is the same on every platform.
var exp2Frac = func() (t [32]float64) {
	var root [5]float64 // root[b] = 2^(2^b / 32)
	root[4] = math.Sqrt(2)
	for b := 3; b >= 0; b-- {
		root[b] = math.Sqrt(root[b+1])
	}
	for j := range t {
		v := 1.0
		for b := range 5 {
			if j&(1<<b) != 0 {
				v = float64(v * root[b])
			}
		}
		t[j] = v
	}
	return t
}()
