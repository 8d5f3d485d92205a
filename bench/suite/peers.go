package suite

import "github.com/kernelrt/kernelrt/orchestrator"

// Numbers from ../shared/peers.md, measured elsewhere (2-vCPU Cascade Lake VM, quiet machine,
// medians). They are only shown next to this run's numbers for the Qwen2-0.5B shape, and
// labelled "peers.md" wherever they appear.

// llamaCpp is llama-bench on synthetic Qwen2-0.5B: recipe -> threads -> {tg64, pp128} tok/s.
// "mixed-q5_0" is peers.md's "Q5_0 mixed (embedding/output Q8_0)" row, which is what
// orchestrator.RecipeMixed builds.
var llamaCpp = map[string]map[int][2]float64{
	"q8_0":       {1: {11.4, 70.7}, 2: {22.3, 115}},
	"mixed-q5_0": {1: {13.4, 56.9}, 2: {24.2, 104}},
}

type ggmlKey struct {
	typ        string
	rows, cols int
}

// ggmlGemv is ggml's single mul_mat with weights streaming from DRAM: median µs at
// {1, 2} threads.
var ggmlGemv = map[ggmlKey][2]float64{
	{"q8_0", 896, 896}:    {126.8, 84.1},
	{"q8_0", 4864, 896}:   {651, 358},
	{"q8_0", 9728, 896}:   {1351, 822},
	{"q8_0", 896, 4864}:   {680, 382},
	{"q8_0", 151936, 896}: {21354, 11903},
	{"q5_0", 896, 896}:    {107.0, 72.3},
	{"q5_0", 4864, 896}:   {562, 337},
	{"q5_0", 9728, 896}:   {1113, 691},
	{"q5_0", 896, 4864}:   {529, 297},
	{"q5_0", 151936, 896}: {17334, 10208},
}

// ggmlUs returns peers.md's streaming µs for a GEMV, or 0.
func ggmlUs(typ string, rows, cols, threads int) float64 {
	v, ok := ggmlGemv[ggmlKey{typ, rows, cols}]
	if !ok || threads < 1 || threads > 2 {
		return 0
	}
	return v[threads-1]
}

// llamaTokS returns peers.md's llama.cpp {tg64, pp128} for a recipe and thread count.
func llamaTokS(recipe string, threads int) (tg, pp float64) {
	v, ok := llamaCpp[recipe][threads]
	if !ok {
		return 0, 0
	}
	return v[0], v[1]
}

// isQwen2_0_5B reports whether c has Qwen2-0.5B's shape, the only one peers.md measured.
func isQwen2_0_5B(c orchestrator.Config) bool {
	q := orchestrator.Qwen2_0_5B()
	return c.Layers == q.Layers && c.Hidden == q.Hidden && c.Intermediate == q.Intermediate &&
		c.Heads == q.Heads && c.KVHeads == q.KVHeads && c.HeadDim == q.HeadDim && c.Vocab == q.Vocab
}
