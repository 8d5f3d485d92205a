// Command depthcmp measures decode at depth and long prefills of one GGUF file with kernelrt
// and with llama.cpp's llama-batched-bench, side by side in one run, per KV cache type:
//
//	go run ./tools/depthcmp -llama /path/to/llama-batched-bench -model FILE.gguf \
//	    [-depth 0,512,2048,8192,16384] [-pp 512,2048,8192] [-kv f32,f16,q8_0] [-tg 32] [-r 3] [-threads 2]
//
// For each KV type it runs kernelrt (bench/suite.MeasureDepth, as `kernelrt bench -depth`)
// and then llama-batched-bench -npl 1 -ntg TG -npp <each depth and prefill length> with
// -ctk/-ctv of that type (q8_0 needs -fa; -fa turns it on for every type). llama.cpp's decode
// after a prompt of N tokens is its S_TG at npp N (depth 0: npp 1); its prefill is S_PP. Both use the same
// threads; the machine is sampled for streaming bandwidth through the kernelrt runs, and
// llama.cpp's decode gets the same limit (same weights and KV bytes per token). A measuring tool
// for the issue notes, not part of make test: CI has no llama.cpp.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/bench/suite"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// llamaRow is one line of llama-batched-bench's jsonl output.
type llamaRow struct {
	PP      int     `json:"pp"`
	TG      int     `json:"tg"`
	SpeedPP float64 `json:"speed_pp"`
	SpeedTG float64 `json:"speed_tg"`
}

func main() {
	llama := flag.String("llama", "", "the llama-batched-bench binary")
	model := flag.String("model", "", "GGUF model file (both run it)")
	depthS := flag.String("depth", "0,512,2048,8192,16384", "prompt lengths decode is measured after")
	ppS := flag.String("pp", "512,2048,8192", "prefill lengths")
	kvS := flag.String("kv", "f32,f16,q8_0", "KV cache types")
	tg := flag.Int("tg", 32, "tokens decoded per measurement")
	reps := flag.Int("r", 3, "kernelrt repetitions (median; llama-batched-bench runs each once)")
	threads := flag.Int("threads", 2, "threads for both")
	fa := flag.Bool("fa", false, "llama.cpp: flash attention for every KV type (q8_0 always uses it)")
	flag.Parse()
	if *llama == "" || *model == "" {
		fmt.Fprintln(os.Stderr, "usage: depthcmp -llama BIN -model FILE [-depth list] [-pp list] [-kv list] [-tg N] [-r N] [-threads N] [-fa]")
		os.Exit(2)
	}
	depths, err1 := ints(*depthS)
	pps, err2 := ints(*ppS)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "depthcmp: bad -depth or -pp:", err1, err2)
		os.Exit(2)
	}
	var kvs []orchestrator.KVType
	for _, s := range strings.Split(*kvS, ",") {
		k, err := orchestrator.ParseKVType(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "depthcmp:", err)
			os.Exit(2)
		}
		kvs = append(kvs, k)
	}
	if err := run(*llama, *model, depths, pps, kvs, *tg, *reps, *threads, *fa); err != nil {
		fmt.Fprintln(os.Stderr, "depthcmp:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q", p)
		}
		out = append(out, v)
	}
	return out, nil
}

func run(llama, model string, depths, pps []int, kvs []orchestrator.KVType, tg, reps, threads int, fa bool) error {
	maxCtx := tg + 20
	for _, n := range depths {
		maxCtx = max(maxCtx, n+tg)
	}
	for _, n := range pps {
		maxCtx = max(maxCtx, n)
	}
	rt, err := kernelrt.New(kernelrt.Options{Threads: threads})
	if err != nil {
		return err
	}
	defer rt.Close()
	open := func(kv orchestrator.KVType, ctx, batch int) (*orchestrator.Model, error) {
		return orchestrator.LoadGGUF(model, orchestrator.LoadOptions{KV: kv, MaxCtx: ctx, MaxBatch: batch,
			File: arena.FileOptions{WillNeed: true}, Build: orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}})
	}
	type llamaRes struct{ tg, pp map[int]float64 }
	var krt []*suite.Depth
	var lcp []llamaRes
	for _, kv := range kvs {
		fmt.Fprintf(os.Stderr, "== kv %s: kernelrt\n", kv)
		d, err := suite.MeasureDepth(open, rt, suite.DepthOptions{KV: []orchestrator.KVType{kv}, Depths: depths, Prefill: pps,
			DecodeTokens: tg, Repeats: reps}, os.Stderr)
		if err != nil {
			return err
		}
		krt = append(krt, d)
		fmt.Fprintf(os.Stderr, "== kv %s: llama.cpp\n", kv)
		// llama-batched-bench (c392e509) corrupts its heap at -npp 0 ("free(): invalid next
		// size") and aborts later in the run: depth 0 is asked as a 1-token prompt.
		var list []string
		seen := map[int]bool{}
		for _, n := range append(append([]int(nil), depths...), pps...) {
			if n = max(n, 1); !seen[n] {
				seen[n] = true
				list = append(list, strconv.Itoa(n))
			}
		}
		args := []string{"-m", model, "-c", strconv.Itoa(maxCtx + 16), "-npp", strings.Join(list, ","), "-ntg", strconv.Itoa(tg),
			"-npl", "1", "-t", strconv.Itoa(threads), "-ctk", kv.String(), "-ctv", kv.String(), "--output-format", "jsonl"}
		if fa || kv == orchestrator.KVQ8_0 {
			args = append(args, "-fa")
		}
		cmd := exec.Command(llama, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, nil
		if err := cmd.Run(); err != nil {
			// Keep the rows it printed before failing; the missing ones show as "-".
			fmt.Fprintf(os.Stderr, "depthcmp: %s %s: %v\n", llama, strings.Join(args, " "), err)
		}
		res := llamaRes{tg: map[int]float64{}, pp: map[int]float64{}}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			var r llamaRow
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.TG == tg {
				res.tg[r.PP], res.pp[r.PP] = r.SpeedTG, r.SpeedPP
				if r.PP == 1 {
					res.tg[0] = r.SpeedTG
				}
			}
		}
		lcp = append(lcp, res)
	}
	bw, wb := 0.0, 0
	for _, d := range krt {
		bw, wb = max(bw, d.BandwidthGBs), d.WeightBytes
	}
	fmt.Printf("%s: %d threads; weights %.1f MiB per token; bandwidth (best in-run sample) %.1f GB/s\n", model, threads,
		float64(wb)/(1<<20), bw)
	fmt.Printf("limit t/s = bandwidth / (weight bytes + KV bytes read per token), the same for both\n\n")
	fmt.Printf("| kv | depth | kernelrt tg%d t/s | %% of limit | llama.cpp t/s | %% of limit | kernelrt / llama.cpp |\n", tg)
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- |\n")
	for i, d := range krt {
		for _, r := range d.Decode {
			limit := bw * 1e9 / float64(wb+r.KVBytes)
			l := lcp[i].tg[r.Depth]
			fmt.Printf("| %s | %d | %.2f | %.0f%% | %s | %s | %s |\n", r.KV, r.Depth, r.TokS, 100*r.TokS/limit, num(l, "%.2f"),
				num(100*l/limit, "%.0f%%"), num(r.TokS/l, "%.2f"))
		}
	}
	fmt.Printf("\n| kv | prompt | kernelrt pp t/s | llama.cpp pp t/s | kernelrt / llama.cpp |\n| --- | --- | --- | --- | --- |\n")
	for i, d := range krt {
		for _, r := range d.Prefill {
			l := lcp[i].pp[r.Tokens]
			fmt.Printf("| %s | %d | %.1f | %s | %s |\n", r.KV, r.Tokens, r.TokS, num(l, "%.1f"), num(r.TokS/l, "%.2f"))
		}
	}
	return nil
}

// num formats v, or "-" when it was not measured (0, Inf, NaN).
func num(v float64, f string) string {
	if !(v > 0) || v > 1e300 {
		return "-"
	}
	return fmt.Sprintf(f, v)
}
