// Package perplexity scores a language model on a text as llama.cpp's llama-perplexity does:
// the perplexity of the text in chunks of Ctx tokens, each scored on its second half, and
// the KL divergence of a second (quantized) model's token distributions from a first
// (base) model's, saved in llama-perplexity's --kl-divergence-base file format.
//
// The scoring math works on rows of logits (NLL, PPL, LogProbs, ComparePosition, KLD,
// Percentile), so tests and other drivers can call it directly; Perplexity and KLDivergence
// drive a Model chunk by chunk and hold one chunk's logits at most (the model's own buffer);
// what grows with the text is the token list and, for KL, one float32 per scored position
// and statistic (the percentiles need them).
package perplexity

import (
	"fmt"
	"math"
	"slices"
)

// maxRow bounds the length of a row of logits the functions take (a vocabulary).
const maxRow = 1 << 24

// checkRow refuses an empty or oversized row and a target outside it.
func checkRow(name string, row []float32, target int32) error {
	if len(row) == 0 || len(row) > maxRow {
		return fmt.Errorf("perplexity: %s has %d values, want 1..%d", name, len(row), maxRow)
	}
	if target < 0 || int(target) >= len(row) {
		return fmt.Errorf("perplexity: target token %d is outside the %d %s", target, len(row), name)
	}
	return nil
}

// expf is C's expf: the float32 exponential (math.Exp rounded to float32; glibc's expf is
// correctly rounded, so the two agree but for rare double roundings).
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// softmaxNorm returns the largest logit, the index of its first occurrence and
// log(sum(exp(l - max))), computed as llama-perplexity does: the differences and their
// exponentials in float32, the sum in float64.
func softmaxNorm(logits []float32) (maxLogit float32, imax int, logSum float64) {
	maxLogit = logits[0]
	for i, v := range logits[1:] {
		if v > maxLogit {
			maxLogit, imax = v, i+1
		}
	}
	sum := 0.0
	for _, v := range logits {
		sum += float64(expf(v - maxLogit))
	}
	return maxLogit, imax, math.Log(sum)
}

// NLL is the negative log-likelihood of target under softmax(logits), computed as
// llama-perplexity's log_softmax: -(logits[target] - max - log(sum exp(l - max))), the
// difference to the maximum in float32 and the rest in float64. A non-finite result (a NaN
// or infinite logit) is an error.
func NLL(logits []float32, target int32) (float64, error) {
	if err := checkRow("logits", logits, target); err != nil {
		return 0, err
	}
	m, _, ls := softmaxNorm(logits)
	v := -(float64(logits[target]-m) - ls)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("perplexity: the negative log-likelihood of token %d is %v (the logits hold NaN or Inf)", target, v)
	}
	return v, nil
}

// PPL accumulates negative log-likelihoods into a perplexity. The zero value is empty.
type PPL struct {
	sum, sum2 float64
	n         int
}

// Add scores target under softmax(logits) (NLL) and adds it.
func (p *PPL) Add(logits []float32, target int32) error {
	v, err := NLL(logits, target)
	if err != nil {
		return err
	}
	p.AddNLL(v)
	return nil
}

// AddNLL adds one negative log-likelihood.
func (p *PPL) AddNLL(v float64) {
	p.sum += v
	p.sum2 += v * v
	p.n++
}

// Count is the number of positions added.
func (p *PPL) Count() int { return p.n }

// Value is exp(mean NLL), the perplexity; NaN when nothing was added.
func (p *PPL) Value() float64 {
	if p.n == 0 {
		return math.NaN()
	}
	return math.Exp(p.sum / float64(p.n))
}

// Uncertainty is llama-perplexity's "+/-" of the final estimate: PPL times the standard
// error of the mean NLL, sqrt((E[v^2] - E[v]^2) / (n-1)). It is 0 when that variance is not
// positive or fewer than two positions were added (llama.cpp then prints an error instead).
func (p *PPL) Uncertainty() float64 {
	if p.n < 2 {
		return 0
	}
	mean := p.sum / float64(p.n)
	v := p.sum2/float64(p.n) - mean*mean
	if !(v > 0) {
		return 0
	}
	return math.Sqrt(v/float64(p.n-1)) * math.Exp(mean)
}

// KLCutoff is the base log-probability at or below which a token is left out of the KL sum,
// as llama-perplexity leaves it out: the base file clamps log-probabilities 16 below the
// largest one, so smaller ones are unknown.
const KLCutoff = -16

// LogProbs writes log(softmax(logits)) to dst (len(logits) floats): logits[i] - max -
// log(sum exp(l - max)), the last two in float64. It returns the index of the first largest
// logit.
func LogProbs(dst, logits []float32) (int, error) {
	if err := checkRow("logits", logits, 0); err != nil {
		return 0, err
	}
	if len(dst) < len(logits) {
		return 0, fmt.Errorf("perplexity: LogProbs: dst has %d floats for %d logits", len(dst), len(logits))
	}
	m, imax, ls := softmaxNorm(logits)
	norm := float64(m) + ls
	for i, v := range logits {
		dst[i] = float32(float64(v) - norm)
	}
	return imax, nil
}

// Position is one scored position of a KL comparison.
type Position struct {
	// KLD is KL(base || model) = sum of p_base * (log p_base - log p_model) over the tokens
	// whose base log-probability is above KLCutoff.
	KLD float64
	// NLL and BaseNLL are -log p of the target token under the model and the base.
	NLL, BaseNLL float64
	// PDiff is p_model(target) - p_base(target).
	PDiff float64
	// SameTop says both put their largest probability on the same token (the first of
	// equals, for each).
	SameTop bool
}

// ComparePosition compares one position: base holds the base model's log-probabilities
// (from DecodeRow, or LogProbs of its logits), logits the tested model's logits, target the
// token that follows. scratch, of len(logits) floats, receives the model's log-probabilities.
// Identical distributions (the same logits on both sides) give KLD 0 exactly.
func ComparePosition(base, logits, scratch []float32, target int32) (Position, error) {
	if err := checkRow("logits", logits, target); err != nil {
		return Position{}, err
	}
	if len(base) != len(logits) {
		return Position{}, fmt.Errorf("perplexity: the base distribution has %d tokens, the logits %d", len(base), len(logits))
	}
	imax, err := LogProbs(scratch, logits)
	if err != nil {
		return Position{}, err
	}
	q := scratch[:len(logits)]
	kld := 0.0
	ibase := 0
	for i, lb := range base {
		if lb > base[ibase] {
			ibase = i
		}
		if lb > KLCutoff {
			kld += math.Exp(float64(lb)) * (float64(lb) - float64(q[i]))
		}
	}
	p := Position{KLD: kld, NLL: -float64(q[target]), BaseNLL: -float64(base[target]), SameTop: imax == ibase}
	p.PDiff = math.Exp(-p.NLL) - math.Exp(-p.BaseNLL)
	if math.IsNaN(kld) || math.IsInf(kld, 0) || math.IsNaN(p.NLL) || math.IsInf(p.NLL, 0) || math.IsNaN(p.BaseNLL) || math.IsInf(p.BaseNLL, 0) {
		return Position{}, fmt.Errorf("perplexity: a non-finite KL divergence or log-likelihood at target token %d (NaN or Inf in the logits or the base)", target)
	}
	return p, nil
}

// KLD accumulates compared positions into llama-perplexity's KL-divergence statistics. The
// zero value is empty. It keeps one KLD and one PDiff per position, for the percentiles.
type KLD struct {
	nll, nll2, base, base2, cross float64
	kld, kld2                     float64
	pd, pd2, pd4                  float64
	same, n                       int
	klds, pdiffs                  []float32
}

// Add adds one position.
func (k *KLD) Add(p Position) {
	k.nll += p.NLL
	k.nll2 += p.NLL * p.NLL
	k.base += p.BaseNLL
	k.base2 += p.BaseNLL * p.BaseNLL
	k.cross += p.NLL * p.BaseNLL
	k.kld += p.KLD
	k.kld2 += p.KLD * p.KLD
	k.pd += p.PDiff
	d2 := p.PDiff * p.PDiff
	k.pd2 += d2
	k.pd4 += d2 * d2
	if p.SameTop {
		k.same++
	}
	k.n++
	k.klds = append(k.klds, float32(p.KLD))
	k.pdiffs = append(k.pdiffs, float32(p.PDiff))
}

// Count is the number of positions added.
func (k *KLD) Count() int { return k.n }

// Point is one percentile of a distribution: P percent of the values are at most Value
// (P 100 is the maximum, 0 the minimum).
type Point struct {
	P     float64 `json:"p"`
	Value float64 `json:"value"`
}

// KLSummary is what llama-perplexity's KL mode prints. Every "Unc" is the standard error of
// the figure before it, computed as llama.cpp does (0 for 10 positions or fewer).
type KLSummary struct {
	Positions int
	// PPL of the tested model (Q) and of the base, from the positions compared.
	PPL, PPLUnc, BasePPL, BasePPLUnc float64
	// LogPPLCorrelation is Cor(ln PPL(Q), ln PPL(base)) (of the per-position NLLs).
	LogPPLCorrelation float64
	// LogPPLRatio is mean ln(PPL(Q)/PPL(base)); PPLRatio = PPL(Q)/PPL(base); PPLDiff =
	// PPL(Q)-PPL(base).
	LogPPLRatio, LogPPLRatioUnc, PPLRatio, PPLRatioUnc, PPLDiff, PPLDiffUnc float64
	// KLD is the mean KL divergence; KLDPercentiles are its maximum, 99.9, 99, 95, 90,
	// median, 10, 5, 1 percent points and minimum (Final only).
	KLD, KLDUnc    float64
	KLDPercentiles []Point
	// DeltaP is the mean of p_Q(token) - p_base(token); DeltaPPercentiles its maximum, 99.9,
	// 99, 95, 90, 75, median, 25, 10, 5, 1, 0.1 percent points and minimum (Final only);
	// DeltaPRMS its root mean square.
	DeltaP, DeltaPUnc       float64
	DeltaPPercentiles       []Point
	DeltaPRMS, DeltaPRMSUnc float64
	// SameTop is the fraction of positions where both models' most likely token agree.
	SameTop, SameTopUnc float64
}

// meanUnc is llama-perplexity's mean_and_uncertainty: the mean of n values from their sum and
// sum of squares, and its standard error (0 for n <= 10 or a variance that is not positive).
func meanUnc(sum, sum2 float64, n int) (float64, float64) {
	if n < 1 {
		return 0, 0
	}
	f := sum / float64(n)
	df := sum2/float64(n) - f*f
	if df > 0 && n > 10 {
		return f, math.Sqrt(df / float64(n-1))
	}
	return f, 0
}

// covariance is llama-perplexity's covariance of the two means (0 for fewer than 10 values).
func covariance(suma, sumb, sumab float64, n int) float64 {
	if n < 10 {
		return 0
	}
	c := sumab/float64(n) - (suma/float64(n))*(sumb/float64(n))
	return c / float64(n-1)
}

// Means is the summary without the percentiles (cheap: for a running report per chunk).
func (k *KLD) Means() KLSummary {
	s := KLSummary{Positions: k.n}
	if k.n == 0 {
		return s
	}
	lq, lqu := meanUnc(k.nll, k.nll2, k.n)
	lb, lbu := meanUnc(k.base, k.base2, k.n)
	s.PPL, s.BasePPL = math.Exp(lq), math.Exp(lb)
	s.PPLUnc, s.BasePPLUnc = s.PPL*lqu, s.BasePPL*lbu
	cov := covariance(k.nll, k.base, k.cross, k.n)
	s.LogPPLCorrelation = cov / (lqu * lbu)
	s.LogPPLRatio = lq - lb
	s.LogPPLRatioUnc = math.Sqrt(lqu*lqu + lbu*lbu - 2*cov)
	s.PPLRatio = math.Exp(s.LogPPLRatio)
	s.PPLRatioUnc = s.PPLRatio * s.LogPPLRatioUnc
	pcov := s.PPL * s.BasePPL * cov
	s.PPLDiff = s.PPL - s.BasePPL
	s.PPLDiffUnc = math.Sqrt(s.PPLUnc*s.PPLUnc + s.BasePPLUnc*s.BasePPLUnc - 2*pcov)
	s.KLD, s.KLDUnc = meanUnc(k.kld, k.kld2, k.n)
	s.DeltaP, s.DeltaPUnc = meanUnc(k.pd, k.pd2, k.n)
	mse, mseu := meanUnc(k.pd2, k.pd4, k.n)
	s.DeltaPRMS = math.Sqrt(mse)
	if s.DeltaPRMS > 0 {
		s.DeltaPRMSUnc = 0.5 / s.DeltaPRMS * mseu
	}
	s.SameTop = float64(k.same) / float64(k.n)
	if k.n > 1 {
		s.SameTopUnc = math.Sqrt(s.SameTop * (1 - s.SameTop) / float64(k.n-1))
	}
	return s
}

// Final is the whole summary, percentiles included.
func (k *KLD) Final() KLSummary {
	s := k.Means()
	if k.n == 0 {
		return s
	}
	kl := slices.Clone(k.klds)
	pd := slices.Clone(k.pdiffs)
	slices.Sort(kl)
	slices.Sort(pd)
	pts := func(v []float32, ps []float64) []Point {
		out := make([]Point, len(ps))
		for i, p := range ps {
			out[i] = Point{P: p, Value: Percentile(v, p/100)}
		}
		return out
	}
	s.KLDPercentiles = pts(kl, []float64{100, 99.9, 99, 95, 90, 50, 10, 5, 1, 0})
	s.DeltaPPercentiles = pts(pd, []float64{100, 99.9, 99, 95, 90, 75, 50, 25, 10, 5, 1, 0.1, 0})
	return s
}

// Percentile is llama-perplexity's percentile of sorted values: the linear interpolation at
// fraction*(len-1) between neighbours; the first value for fraction <= 0, the last for
// fraction >= 1 (the median is fraction 0.5). NaN for no values.
func Percentile(sorted []float32, fraction float64) float64 {
	n := len(sorted)
	switch {
	case n == 0 || math.IsNaN(fraction):
		return math.NaN()
	case fraction <= 0:
		return float64(sorted[0])
	case fraction >= 1:
		return float64(sorted[n-1])
	}
	p := fraction * float64(n-1)
	ip := int(p)
	p -= float64(ip)
	return (1-p)*float64(sorted[ip]) + p*float64(sorted[min(ip+1, n-1)])
}
