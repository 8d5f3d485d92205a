package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// The expected ids come from llama.cpp itself: go test ./tokenizer -run TestLlamaCppIDs
// -update runs llama-tokenize on every corpus case and rewrites the golden file. make test
// never does; it only compares against the file.
var (
	update        = flag.Bool("update", false, "rewrite "+goldenPath+" by running llama.cpp's llama-tokenize")
	llamaTokenize = flag.String("llama-tokenize", "/work/oracle/llama.cpp/build/bin/llama-tokenize", "llama-tokenize binary for -update")
	llamaCommit   = flag.String("llama-commit", "c392e5094deaf2d1a7c18683214f007fad3fe42b", "llama.cpp commit of -llama-tokenize, recorded in the golden file")
	updateOnly    = flag.String("update-only", "", "with -update: regenerate only these comma-separated vocabularies, keep the others")
	nlcModule     = flag.String("nlc", "/work/oracle/npm/node_modules/node-llama-cpp/dist/index.js", "node-llama-cpp module for -update: ids of its newer bundled llama.cpp (\"\" to skip)")
)

const goldenPath = "testdata/llamacpp_ids.json"

// goldenCase holds llama-tokenize's ids for one text in the four modes, and the ids of the
// newer llama.cpp inside node-llama-cpp (no BOS; absent for text that is not valid UTF-8,
// which a JavaScript string cannot carry, and when empty).
type goldenCase struct {
	Plain      []int32 `json:"plain"`       // --no-bos --no-parse-special
	PlainBOS   []int32 `json:"plain_bos"`   // --no-parse-special
	Special    []int32 `json:"special"`     // --no-bos
	SpecialBOS []int32 `json:"special_bos"` // (defaults)
	NewPlain   []int32 `json:"newer_plain,omitempty"`
	NewSpecial []int32 `json:"newer_special,omitempty"`
}

type goldenFile struct {
	Source      string                           `json:"source"`
	NewerSource string                           `json:"newer_source,omitempty"`
	Vocabs      map[string]map[string]goldenCase `json:"vocabs"`
}

var modes = []struct {
	name                   string
	addSpecial, parseSpecl bool
	get                    func(*goldenCase) *[]int32
}{
	{"plain", false, false, func(g *goldenCase) *[]int32 { return &g.Plain }},
	{"plain+bos", true, false, func(g *goldenCase) *[]int32 { return &g.PlainBOS }},
	{"special", false, true, func(g *goldenCase) *[]int32 { return &g.Special }},
	{"special+bos", true, true, func(g *goldenCase) *[]int32 { return &g.SpecialBOS }},
}

// expected is what a mode of a case must give: llama-tokenize's ids, unless the newer
// llama.cpp tokenizes the text differently (a behaviour llama.cpp changed since, such as
// "</s>" becoming an end-of-generation control token), in which case the newer ids with
// llama-tokenize's BOS handling. changed reports that.
func expected(gc *goldenCase, m int) (want []int32, changed bool) {
	old := *modes[m].get(gc)
	oldNoBOS, newer := gc.Plain, gc.NewPlain
	if modes[m].parseSpecl {
		oldNoBOS, newer = gc.Special, gc.NewSpecial
	}
	if newer == nil || slices.Equal(newer, oldNoBOS) {
		return old, false
	}
	prefix := old[:len(old)-len(oldNoBOS)]
	return append(slices.Clip(prefix), newer...), true
}

// TestLlamaCppIDs checks every corpus case, vocabulary and mode against llama.cpp's ids.
func TestLlamaCppIDs(t *testing.T) {
	if *update {
		generateGolden(t)
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	var changes []string
	fmt.Fprintf(&table, "%-14s", "vocab")
	for _, m := range modes {
		fmt.Fprintf(&table, " %16s", m.name)
	}
	table.WriteString("\n")
	for _, v := range testVocabs {
		tok := loadVocab(t, v)
		cases, ok := g.Vocabs[v]
		if !ok {
			t.Fatalf("%s has no ids for vocabulary %s: run with -update", goldenPath, v)
		}
		fmt.Fprintf(&table, "%-14s", v)
		for mi, m := range modes {
			same, newer := 0, 0
			for _, c := range corpus {
				gc, ok := cases[c.name]
				if !ok {
					t.Fatalf("%s has no ids for case %q: run with -update", goldenPath, c.name)
				}
				want, changed := expected(&gc, mi)
				got, err := tok.Encode(c.text, EncodeOptions{AddSpecial: m.addSpecial, ParseSpecial: m.parseSpecl})
				if err != nil {
					t.Fatal(err)
				}
				if changed {
					newer++
					if mi == 0 || mi == 2 {
						changes = append(changes, fmt.Sprintf("%s %s %q", v, m.name, c.name))
					}
				}
				if slices.Equal(got, want) {
					same++
					continue
				}
				t.Errorf("%s %s %q (%s):\n got  %v\n want %v", v, m.name, c.name, trunc(c.text), got, want)
			}
			cell := fmt.Sprintf("%d/%d", same, len(corpus))
			if newer > 0 {
				cell = fmt.Sprintf("%d/%d (%d new)", same, len(corpus), newer)
			}
			fmt.Fprintf(&table, " %16s", cell)
		}
		table.WriteString("\n")
	}
	t.Logf("ids equal to llama.cpp's (%s; \"new\": cases where %s differs and is followed):\n%s",
		g.Source, g.NewerSource, table.String())
	if len(changes) > 0 {
		t.Logf("cases where llama.cpp changed since %.8s: %s", *llamaCommit, strings.Join(changes, ", "))
	}
}

func trunc(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q...", s[:60])
	}
	return fmt.Sprintf("%q", s)
}

// generateGolden runs llama-tokenize for every vocabulary, case and mode (two at a time) and
// writes the golden file, one line per case.
func generateGolden(t *testing.T) {
	if _, err := os.Stat(*llamaTokenize); err != nil {
		t.Fatalf("-update needs llama.cpp's llama-tokenize (-llama-tokenize): %v", err)
	}
	dir := t.TempDir()
	g := goldenFile{
		Vocabs: map[string]map[string]goldenCase{},
		Source: fmt.Sprintf("llama.cpp %s llama-tokenize --ids --no-escape -f FILE [--no-bos] [--no-parse-special]", *llamaCommit),
	}
	type job struct {
		vocab, model, text string
		c                  *goldenCase
		m                  int
	}
	var jobs []job
	ptrs := map[string]map[string]*goldenCase{}
	if *updateOnly != "" {
		raw, err := os.ReadFile(goldenPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range testVocabs {
		if *updateOnly != "" && !slices.Contains(strings.Split(*updateOnly, ","), v) {
			continue
		}
		model := filepath.Join(dir, v+".gguf")
		if err := os.WriteFile(model, readVocab(t, v), 0o644); err != nil {
			t.Fatal(err)
		}
		ptrs[v] = map[string]*goldenCase{}
		for i, c := range corpus {
			text := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", v, i))
			if err := os.WriteFile(text, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			gc := new(goldenCase)
			ptrs[v][c.name] = gc
			for m := range modes {
				jobs = append(jobs, job{v, model, text, gc, m})
			}
		}
	}
	var wg sync.WaitGroup
	ch := make(chan job)
	errs := make(chan error, len(jobs))
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				args := []string{"-m", j.model, "-f", j.text, "--ids", "--no-escape", "--log-disable"}
				if !modes[j.m].addSpecial {
					args = append(args, "--no-bos")
				}
				if !modes[j.m].parseSpecl {
					args = append(args, "--no-parse-special")
				}
				out, err := exec.Command(*llamaTokenize, args...).Output()
				if err != nil {
					errs <- fmt.Errorf("%s %v: %v", *llamaTokenize, args, err)
					continue
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				var ids []int32
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &ids); err != nil {
					errs <- fmt.Errorf("%v: output %q: %v", args, out, err)
					continue
				}
				if ids == nil {
					ids = []int32{}
				}
				*modes[j.m].get(j.c) = ids
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if *nlcModule != "" {
		g.NewerSource = newerIDs(t, dir, ptrs)
	}
	for v, cs := range ptrs {
		g.Vocabs[v] = map[string]goldenCase{}
		for name, gc := range cs {
			g.Vocabs[v][name] = *gc
		}
	}
	writeGolden(t, g)
	t.Logf("wrote %s: %d llama-tokenize runs", goldenPath, len(jobs))
}

// nlcScript tokenizes a JSON list of texts with node-llama-cpp (a vocabulary-only model),
// with and without special-token parsing, and prints the ids after "RESULT:".
const nlcScript = `import { getLlama } from %q;
import { readFileSync } from "node:fs";
const [modelPath, textsPath] = process.argv.slice(2);
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath, vocabOnly: true });
const out = texts.map(t => [Array.from(model.tokenize(t, true)), Array.from(model.tokenize(t, false))]);
console.log("RESULT:" + JSON.stringify(out));
await model.dispose();
await llama.dispose();
`

// newerIDs fills the newer_* ids from node-llama-cpp and returns a description of it.
func newerIDs(t *testing.T, dir string, ptrs map[string]map[string]*goldenCase) string {
	script := filepath.Join(dir, "nlc.mjs")
	if err := os.WriteFile(script, fmt.Appendf(nil, nlcScript, *nlcModule), 0o644); err != nil {
		t.Fatal(err)
	}
	var names, texts []string
	for _, c := range corpus {
		if utf8.ValidString(c.text) {
			names = append(names, c.name)
			texts = append(texts, c.text)
		}
	}
	textsJSON, _ := json.Marshal(texts)
	textsPath := filepath.Join(dir, "texts.json")
	if err := os.WriteFile(textsPath, textsJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	for v := range ptrs {
		out, err := exec.Command("node", script, filepath.Join(dir, v+".gguf"), textsPath).Output()
		if err != nil {
			t.Fatalf("node-llama-cpp on %s: %v", v, err)
		}
		_, res, ok := strings.Cut(string(out), "RESULT:")
		var ids [][2][]int32
		if !ok || json.Unmarshal([]byte(res), &ids) != nil || len(ids) != len(names) {
			t.Fatalf("node-llama-cpp on %s: unexpected output %.200q", v, out)
		}
		for i, n := range names {
			gc := ptrs[v][n]
			gc.NewSpecial, gc.NewPlain = nonNil(ids[i][0]), nonNil(ids[i][1])
		}
	}
	version := "?"
	var pkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(*nlcModule)), "package.json")); err == nil && json.Unmarshal(b, &pkg) == nil {
		version = pkg.Version
	}
	return "node-llama-cpp " + version + " (its bundled llama.cpp), model.tokenize(text, specialTokens)"
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// writeGolden writes g with one line per case, so a diff shows which cases changed.
func writeGolden(t *testing.T, g goldenFile) {
	var b bytes.Buffer
	src, _ := json.Marshal(g.Source)
	newer, _ := json.Marshal(g.NewerSource)
	fmt.Fprintf(&b, "{\n\"source\": %s,\n\"newer_source\": %s,\n\"vocabs\": {\n", src, newer)
	vocabs := make([]string, 0, len(g.Vocabs))
	for v := range g.Vocabs {
		vocabs = append(vocabs, v)
	}
	sort.Strings(vocabs)
	for i, v := range vocabs {
		fmt.Fprintf(&b, "%q: {\n", v)
		names := make([]string, 0, len(g.Vocabs[v]))
		for n := range g.Vocabs[v] {
			names = append(names, n)
		}
		sort.Strings(names)
		for j, n := range names {
			line, err := json.Marshal(g.Vocabs[v][n])
			if err != nil {
				t.Fatal(err)
			}
			sep := ","
			if j == len(names)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "  %q: %s%s\n", n, line, sep)
		}
		sep := ","
		if i == len(vocabs)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "}%s\n", sep)
	}
	b.WriteString("}\n}\n")
	if err := os.WriteFile(goldenPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
