package perplexity

import (
	"math"
	"strings"
	"testing"
)

// A logit 200 below the largest has expf(-200) = 0 in float32, so these rows have exact
// probabilities: 1/4 each, 1/2 for two tokens, 1 for one.
var (
	rowQuarter = []float32{0, 0, 0, 0}
	rowHalf    = []float32{0, 0, -200, -200}
	rowOne     = []float32{3, -197, -197, -197}
)

func TestPPLHandComputed(t *testing.T) {
	var p PPL
	for _, c := range []struct {
		row    []float32
		target int32
		nll    float64
	}{{rowQuarter, 2, 2 * math.Ln2}, {rowHalf, 1, math.Ln2}, {rowOne, 0, 0}} {
		v, err := NLL(c.row, c.target)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(v-c.nll) > 1e-15 {
			t.Errorf("NLL(%v, %d) = %v, want %v", c.row, c.target, v, c.nll)
		}
		if err := p.Add(c.row, c.target); err != nil {
			t.Fatal(err)
		}
	}
	// NLLs 2ln2, ln2, 0: mean ln2, so PPL 2; variance (5/3 - 1) ln2^2 = 2/3 ln2^2, so the
	// standard error of the mean is sqrt(2/3 ln2^2 / 2) = ln2/sqrt(3) and the "+/-" 2 ln2/sqrt(3).
	// (Tolerances of a few ulps: arm64 may fuse the multiply-adds.)
	if got := p.Value(); math.Abs(got-2) > 1e-14 {
		t.Errorf("PPL = %.17g, want 2", got)
	}
	if got, want := p.Uncertainty(), 2*math.Ln2/math.Sqrt(3); math.Abs(got-want) > 1e-13 {
		t.Errorf("uncertainty = %.17g, want %.17g", got, want)
	}
	if p.Count() != 3 {
		t.Errorf("Count = %d, want 3", p.Count())
	}
	// A target 200 nats below the others: -log p = log 2 + 200.
	if v, _ := NLL(rowHalf, 3); math.Abs(v-(200+math.Ln2)) > 1e-12 {
		t.Errorf("NLL of a 200-nat-down token = %v, want %v", v, 200+math.Ln2)
	}
	var empty PPL
	if !math.IsNaN(empty.Value()) || empty.Uncertainty() != 0 {
		t.Errorf("empty PPL: %v +/- %v, want NaN +/- 0", empty.Value(), empty.Uncertainty())
	}
}

func TestNLLRejects(t *testing.T) {
	for _, c := range []struct {
		row    []float32
		target int32
		want   string
	}{
		{nil, 0, "has 0 values"},
		{rowQuarter, 4, "target token 4 is outside the 4 logits"},
		{rowQuarter, -1, "target token -1"},
		{[]float32{0, float32(math.NaN())}, 0, "NaN or Inf"},
	} {
		if _, err := NLL(c.row, c.target); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NLL(%v, %d): %v, want an error with %q", c.row, c.target, err, c.want)
		}
	}
}

// klExact is KL(softmax(a) || softmax(b)) in float64.
func klExact(a, b []float32) float64 {
	lsm := func(l []float32) []float64 {
		m := math.Inf(-1)
		for _, v := range l {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range l {
			s += math.Exp(float64(v) - m)
		}
		out := make([]float64, len(l))
		for i, v := range l {
			out[i] = float64(v) - m - math.Log(s)
		}
		return out
	}
	la, lb := lsm(a), lsm(b)
	kl := 0.0
	for i := range la {
		kl += math.Exp(la[i]) * (la[i] - lb[i])
	}
	return kl
}

func TestKLIdenticalIsZero(t *testing.T) {
	logits := []float32{1.5, -2.25, 0.125, 3.75, -0.5, 2}
	base := make([]float32, len(logits))
	scratch := make([]float32, len(logits))
	if _, err := LogProbs(base, logits); err != nil {
		t.Fatal(err)
	}
	p, err := ComparePosition(base, logits, scratch, 4)
	if err != nil {
		t.Fatal(err)
	}
	if p.KLD != 0 || p.PDiff != 0 || !p.SameTop || p.NLL != p.BaseNLL {
		t.Errorf("identical distributions: %+v, want KLD 0, PDiff 0, same top, equal NLLs", p)
	}
}

func TestKLKnownDistributions(t *testing.T) {
	a := []float32{0, 1, 2, 3}
	b := []float32{3, 2, 1, 0}
	base := make([]float32, 4)
	scratch := make([]float32, 4)
	if _, err := LogProbs(base, a); err != nil {
		t.Fatal(err)
	}
	p, err := ComparePosition(base, b, scratch, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := klExact(a, b)
	if math.Abs(p.KLD-want) > 1e-6*want {
		t.Errorf("KLD = %.9g, want %.9g", p.KLD, want)
	}
	// p_b(1) = e^2/(1+e+e^2+e^3), p_a(1) = e/(same).
	z := 1 + math.E + math.E*math.E + math.E*math.E*math.E
	if d := (math.E*math.E - math.E) / z; math.Abs(p.PDiff-d) > 1e-6 {
		t.Errorf("PDiff = %v, want %v", p.PDiff, d)
	}
	if p.SameTop {
		t.Error("argmax 3 against argmax 0 counted as the same top token")
	}
	if math.Abs(p.NLL-(math.Log(z)-2)) > 1e-6 || math.Abs(p.BaseNLL-(math.Log(z)-1)) > 1e-6 {
		t.Errorf("NLL %v, base NLL %v; want %v, %v", p.NLL, p.BaseNLL, math.Log(z)-2, math.Log(z)-1)
	}
	if _, err := ComparePosition(base[:3], b, scratch, 1); err == nil || !strings.Contains(err.Error(), "base distribution has 3 tokens, the logits 4") {
		t.Errorf("length mismatch: %v", err)
	}
}

func TestSameTopAgreement(t *testing.T) {
	var k KLD
	for i := range 40 {
		k.Add(Position{SameTop: i%4 != 0, NLL: 1, BaseNLL: 1})
	}
	s := k.Final()
	if s.SameTop != 0.75 {
		t.Errorf("SameTop = %v, want 0.75 (30 of 40)", s.SameTop)
	}
	if want := math.Sqrt(0.75 * 0.25 / 39); math.Abs(s.SameTopUnc-want) > 1e-14 {
		t.Errorf("SameTopUnc = %v, want %v", s.SameTopUnc, want)
	}
	if math.Abs(s.PPL-math.E) > 1e-14 || math.Abs(s.BasePPL-math.E) > 1e-14 || math.Abs(s.PPLRatio-1) > 1e-14 {
		t.Errorf("PPL %v, base %v, ratio %v; want e, e, 1", s.PPL, s.BasePPL, s.PPLRatio)
	}
}

func TestPercentile(t *testing.T) {
	odd := []float32{1, 2, 3, 4, 5}
	even := []float32{1, 2, 3, 4}
	for _, c := range []struct {
		v    []float32
		f    float64
		want float64
	}{
		{odd, 0.5, 3}, {odd, 0.25, 2}, {odd, 0.1, 1.4}, {odd, 0.999, 4.996}, {odd, 0, 1}, {odd, -1, 1}, {odd, 1, 5}, {odd, 2, 5},
		{even, 0.5, 2.5}, {even, 0.9, 3.7}, {[]float32{7}, 0.3, 7},
	} {
		if got := Percentile(c.v, c.f); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.v, c.f, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 0.5)) {
		t.Error("Percentile of no values is not NaN")
	}
}

func TestKLDStatistics(t *testing.T) {
	// 101 positions with KLD 0, 0.01, ..., 1.00 and PDiff -0.5 .. 0.5: the percentiles are
	// the interpolation points themselves.
	var k KLD
	for i := range 101 {
		k.Add(Position{KLD: float64(i) / 100, PDiff: float64(i-50) / 100, NLL: 2, BaseNLL: 1, SameTop: true})
	}
	s := k.Final()
	if s.Positions != 101 || math.Abs(s.KLD-0.5) > 1e-12 {
		t.Errorf("positions %d, mean KLD %v; want 101, 0.5", s.Positions, s.KLD)
	}
	got := map[float64]float64{}
	for _, p := range s.KLDPercentiles {
		got[p.P] = p.Value
	}
	for p, want := range map[float64]float64{100: 1, 99.9: 0.999, 99: 0.99, 95: 0.95, 90: 0.9, 50: 0.5, 10: 0.1, 5: 0.05, 1: 0.01, 0: 0} {
		if v, ok := got[p]; !ok || math.Abs(v-want) > 1e-6 {
			t.Errorf("KLD %v%% point = %v (present %v), want %v", p, v, ok, want)
		}
	}
	if len(s.DeltaPPercentiles) != 13 || s.DeltaPPercentiles[0].Value != 0.5 || s.DeltaPPercentiles[12].Value != -0.5 {
		t.Errorf("delta-p points %v: want 13 from 0.5 down to -0.5", s.DeltaPPercentiles)
	}
	if math.Abs(s.LogPPLRatio-1) > 1e-12 || math.Abs(s.PPLRatio-math.E) > 1e-12 {
		t.Errorf("ln ratio %v, ratio %v; want 1, e", s.LogPPLRatio, s.PPLRatio)
	}
	// PDiff symmetric around 0: RMS is sqrt(mean of squares) = sqrt(sum i^2 / 101) / 100 for i in -50..50.
	ss := 0.0
	for i := -50; i <= 50; i++ {
		ss += float64(i * i)
	}
	if want := math.Sqrt(ss/101) / 100; math.Abs(s.DeltaPRMS-want) > 1e-12 || math.Abs(s.DeltaP) > 1e-12 {
		t.Errorf("delta-p mean %v, RMS %v; want 0, %v", s.DeltaP, s.DeltaPRMS, want)
	}
}
