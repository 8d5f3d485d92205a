// Command llamacmp checks a GGUF file's logits against llama.cpp's on the same file: it runs
// kernelrt (prefill of a prompt, then greedy decode steps), feeds the same ids to
// llamalogits (a small C program linked against a llama.cpp build: README.md), and reports
// per file the largest difference relative to the row's largest logit, whether the argmax
// agrees at every position, and whether llama.cpp would have chosen the same greedy ids.
//
//	go run ./tools/llamacmp -llama /path/to/llamalogits -n 16 FILE.gguf...
//
// It is a measuring tool for the compatibility tables (issue notes, README), not part of
// make test: CI has no llama.cpp.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
)

func main() {
	llama := flag.String("llama", os.Getenv("LLAMALOGITS"), "the llamalogits binary (default $LLAMALOGITS)")
	prompt := flag.Int("p", 24, "prompt tokens (seeded ids)")
	n := flag.Int("n", 16, "greedy decode steps")
	threads := flag.Int("threads", 2, "threads for both")
	kv := flag.String("kv", "f32", "KV cache type for both: f32 or f16")
	seed := flag.Uint64("seed", 1, "seed of the prompt ids")
	rows := flag.Bool("rows", false, "also print each position's difference to stderr")
	commit := flag.String("commit", "", "the llama.cpp commit llamalogits was built from, recorded in -fixture files")
	fixture := flag.String("fixture", "", "also write each file's ids and llama.cpp's logits as JSON to `DIR`/<file>.json (the test fixtures of orchestrator/testdata/llamacpp)")
	flag.Parse()
	if *llama == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: llamacmp -llama BIN [-p N] [-n N] [-threads N] [-kv f32|f16] FILE.gguf...")
		os.Exit(2)
	}
	fmt.Println("Differences are max |ours - theirs| / max |theirs| over a row, the largest over the rows.")
	fmt.Println("llama.cpp computes a decode step (one token) with other kernels than a batch, so it is")
	fmt.Println("compared both ways; its own decode-vs-batch difference is the noise floor.")
	fmt.Println()
	fmt.Println("A row within 1e-5 agrees to float32 rounding; a quantized activation within rounding error of")
	fmt.Println("a tie can round the other way on one side, and when it is a key or value every later row moves.")
	fmt.Println()
	fmt.Println("| file | weight types | positions | prefill vs llama.cpp | decode vs llama.cpp decode | decode vs llama.cpp batch | llama.cpp decode vs batch | rows within 1e-5 | argmax agree | llama.cpp decode vs batch argmax agree | greedy ids agree |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	bad := false
	for _, path := range flag.Args() {
		row, err := compare(path, *llama, *prompt, *n, *threads, *kv, *seed, *fixture, *commit, *rows)
		if err != nil {
			fmt.Fprintf(os.Stderr, "llamacmp: %s: %v\n", path, err)
			bad = true
			continue
		}
		fmt.Println(row)
	}
	if bad {
		os.Exit(1)
	}
}

// Fixture is what -fixture writes per file: the ids kernelrt evaluated (a seeded prompt, then
// its greedy choices) and llama.cpp's logits of every position (the prompt in one batch, then
// one token per call), for a test that needs no llama.cpp (orchestrator's TestLlamaCppFixtures).
type Fixture struct {
	File      string      `json:"file"`
	LlamaCpp  string      `json:"llama_cpp"` // the llama.cpp commit of the logits
	KV        string      `json:"kv"`
	PromptLen int         `json:"prompt_len"`
	IDs       []int32     `json:"ids"`
	Logits    [][]float32 `json:"logits"`
}

func compare(path, llama string, P, n, threads int, kvName string, seed uint64, fixtureDir, commit string, perRow bool) (string, error) {
	kv, err := orchestrator.ParseKVType(kvName)
	if err != nil {
		return "", err
	}
	m, err := orchestrator.LoadGGUF(path, orchestrator.LoadOptions{AllLogits: true, KV: kv, MaxCtx: P + n + 16, MaxBatch: P})
	if err != nil {
		return "", err
	}
	defer m.Close()
	rt, err := kernelrt.New(kernelrt.Options{Threads: threads})
	if err != nil {
		return "", err
	}
	defer rt.Close()
	V := m.Vocab()
	ids := make([]int32, P, P+n)
	s := seed*0x9E3779B97F4A7C15 | 1
	for i := range ids {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		ids[i] = int32(s % uint64(min(V, 32000)))
	}
	var ours [][]float32
	logits, err := m.Prefill(rt, ids)
	if err != nil {
		return "", err
	}
	for t := range P {
		ours = append(ours, append([]float32(nil), logits[t*V:(t+1)*V]...))
	}
	var gen []int32
	last := ours[P-1]
	for j := range n {
		gen = append(gen, argmax(last))
		if j == n-1 {
			break
		}
		l, err := m.Decode(rt, gen[j])
		if err != nil {
			return "", err
		}
		last = append([]float32(nil), l...)
		ours = append(ours, last)
	}
	all := append(append([]int32(nil), ids...), gen[:n-1]...)
	theirs, err := runLlama(llama, path, threads, kvName, P, all)
	if err != nil {
		return "", err
	}
	batch, err := runLlama(llama, path, threads, kvName, len(all), all)
	if err != nil {
		return "", err
	}
	for _, rows := range [][][]float32{theirs, batch} {
		if len(rows) != len(ours) {
			return "", fmt.Errorf("llamalogits gave %d rows, want %d", len(rows), len(ours))
		}
		for i := range rows {
			if len(rows[i]) != V {
				return "", fmt.Errorf("llamalogits row %d has %d logits, the model's vocabulary %d", i, len(rows[i]), V)
			}
		}
	}
	if fixtureDir != "" {
		fx := Fixture{File: filepath.Base(path), LlamaCpp: commit, KV: kvName, PromptLen: P, IDs: all, Logits: theirs}
		b, err := json.Marshal(fx)
		if err != nil {
			return "", err
		}
		out := filepath.Join(fixtureDir, strings.TrimSuffix(filepath.Base(path), ".gguf")+".json")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return "", err
		}
	}
	var relP, relD, relB, self float64
	agree, greedy, exact, selfAgree := 0, n, 0, 0
	for i := range ours {
		if i < P {
			relP = math.Max(relP, rel(ours[i], theirs[i]))
		} else {
			relD = math.Max(relD, rel(ours[i], theirs[i]))
			relB = math.Max(relB, rel(ours[i], batch[i]))
			self = math.Max(self, rel(theirs[i], batch[i]))
		}
		if perRow {
			fmt.Fprintf(os.Stderr, "%s position %d: vs llama.cpp %.2g (its batch %.2g, its decode vs batch %.2g)\n", path, i, rel(ours[i], theirs[i]), rel(ours[i], batch[i]), rel(theirs[i], batch[i]))
		}
		if rel(ours[i], theirs[i]) <= 1e-5 {
			exact++
		}
		if argmax(ours[i]) == argmax(theirs[i]) {
			agree++
		}
		if argmax(theirs[i]) == argmax(batch[i]) {
			selfAgree++
		}
		if j := i - (P - 1); j >= 0 && greedy == n && argmax(theirs[i]) != gen[j] {
			greedy = j
		}
	}
	g := "all " + strconv.Itoa(n)
	if greedy < n {
		g = fmt.Sprintf("first %d of %d", greedy, n)
	}
	return fmt.Sprintf("| %s | %s | %d+%d | %.2g | %.2g | %.2g | %.2g | %d/%d | %d/%d | %d/%d | %s |", path, types(m), P, n-1, relP, relD, relB, self, exact, len(ours), agree, len(ours), selfAgree, len(ours), g), nil
}

// rel is max |a - b| / max |b|.
func rel(a, b []float32) float64 {
	d, scale := 0.0, 0.0
	for j := range b {
		d = math.Max(d, math.Abs(float64(a[j]-b[j])))
		scale = math.Max(scale, math.Abs(float64(b[j])))
	}
	return d / scale
}

// types lists the file's matrix types with counts, e.g. "q4_K x97, q6_K x13".
func types(m *orchestrator.Model) string {
	f := m.File()
	if f == nil {
		return "?"
	}
	count := map[string]int{}
	var order []string
	for _, t := range f.Tensors {
		if len(t.Dims) < 2 {
			continue
		}
		k := t.Type.String()
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s x%d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

func runLlama(bin, path string, threads int, kv string, P int, ids []int32) ([][]float32, error) {
	var list strings.Builder
	for i, id := range ids {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(strconv.Itoa(int(id)))
	}
	cmd := exec.Command(bin, path, strconv.Itoa(threads), kv, strconv.Itoa(P), list.String())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", bin, err, strings.TrimSpace(errb.String()))
	}
	var res struct {
		Logits [][]float32 `json:"logits"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s output: %v", bin, err)
	}
	return res.Logits, nil
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
