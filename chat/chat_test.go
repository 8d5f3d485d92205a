package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type testCase struct {
	Name     string    `json:"name"`
	Messages []Message `json:"messages"`
}

func loadCases(t *testing.T) []testCase {
	raw, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// specials returns the BOS and EOS text tools/chatref gave llama-server for a template.
func specials(name string) (string, string) {
	if strings.HasPrefix(name, "qwen") {
		return "<|endoftext|>", "<|im_end|>"
	}
	return "<|begin_of_text|>", "<|eot_id|>"
}

// reference is one template of testdata with what it needs to render as the references did.
type reference struct {
	name     string
	tmpl     *Template
	bos, eos string
}

func loadTemplates(t *testing.T) []reference {
	files, _ := filepath.Glob("testdata/templates/*.jinja")
	if len(files) < 5 {
		t.Fatalf("found %d templates", len(files))
	}
	var refs []reference
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Parse(string(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tmpl.Format() != Jinja {
			t.Errorf("%s rendered by %v, not the Jinja engine", name, tmpl.Format())
		}
		bos, eos := specials(name)
		refs = append(refs, reference{name, tmpl, bos, eos})
	}
	return refs
}

// referenceDate is the day the references were rendered (strftime_now's, for Llama 3.2).
func referenceDate(t *testing.T) time.Time {
	raw, err := os.ReadFile("testdata/expected/now.txt")
	if err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse("2006-01-02", strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// TestMatchesLlamaCpp compares every template and case with llama.cpp's rendering
// (testdata/expected, made by tools/chatref with llama-server --jinja), byte for byte. The
// templates llama.cpp could not parse (expected/unparsed.txt) have no such files.
func TestMatchesLlamaCpp(t *testing.T) {
	now := referenceDate(t)
	cases := loadCases(t)
	compared := 0
	for _, r := range loadTemplates(t) {
		if _, err := os.Stat(filepath.Join("testdata/expected", r.name)); err != nil {
			continue
		}
		for _, c := range cases {
			want, err := os.ReadFile(filepath.Join("testdata/expected", r.name, c.Name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.tmpl.Render(c.Messages, Options{AddGenerationPrompt: true, BOS: r.bos, EOS: r.eos, Now: now})
			if err != nil {
				t.Errorf("%s/%s: %v", r.name, c.Name, err)
				continue
			}
			if got != string(want) {
				t.Errorf("%s/%s differs from llama.cpp:\n got %q\nwant %q", r.name, c.Name, got, want)
			}
			compared++
		}
	}
	if compared < 4*len(cases) {
		t.Fatalf("compared %d renderings with llama.cpp's", compared)
	}
}

// TestMatchesJinja2 compares with Python Jinja2's rendering (testdata/jinja2, made by
// tools/chatref/jinja2_ref.py), with and without the generation prompt. The one known
// difference is trim: llama.cpp's strips ASCII whitespace only, Python's Unicode spaces too.
func TestMatchesJinja2(t *testing.T) {
	now := referenceDate(t)
	for _, r := range loadTemplates(t) {
		for _, c := range loadCases(t) {
			for _, gen := range []bool{true, false} {
				file := c.Name + ".nogen.txt"
				if gen {
					file = c.Name + ".gen.txt"
				}
				want, err := os.ReadFile(filepath.Join("testdata/jinja2", r.name, file))
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.tmpl.Render(c.Messages, Options{AddGenerationPrompt: gen, BOS: r.bos, EOS: r.eos, Now: now})
				if err != nil {
					t.Errorf("%s/%s: %v", r.name, file, err)
					continue
				}
				trims := strings.HasPrefix(r.name, "llama3") && c.Name == "unicode_spaces"
				if (got == string(want)) == trims {
					t.Errorf("%s/%s: equal to Jinja2 = %v, want %v:\n got %q\nwant %q", r.name, file, got == string(want), !trims, got, want)
				}
			}
		}
	}
}

// TestBuiltinMatchesLlamaCpp compares the built-in formats with llama.cpp's own
// (llama-server without --jinja, testdata/expected/builtin-*).
func TestBuiltinMatchesLlamaCpp(t *testing.T) {
	for _, f := range []Format{ChatML, Llama3} {
		tmpl, err := Builtin(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range loadCases(t) {
			want, err := os.ReadFile(filepath.Join("testdata/expected", "builtin-"+f.String(), c.Name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(c.Messages, Options{AddGenerationPrompt: true})
			if err != nil || got != string(want) {
				t.Errorf("%v/%s: %v\n got %q\nwant %q", f, c.Name, err, got, want)
			}
		}
	}
	if _, err := Builtin(Jinja); err == nil {
		t.Error("Builtin(Jinja) succeeded")
	}
}

func TestParseFallbackAndErrors(t *testing.T) {
	if _, err := Parse("  \n"); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("empty template: %v", err)
	}
	// Unparseable Jinja with ChatML / Llama 3 markers: recognised like llama.cpp does.
	for src, want := range map[string]Format{
		"{% for m in messages %}<|im_start|>{{ m.role }{% endfor %": ChatML,
		"{% if %}<|start_header_id|>{{ x }}<|end_header_id|>":       Llama3,
	} {
		tmpl, err := Parse(src)
		if err != nil || tmpl.Format() != want {
			t.Errorf("Parse(%q) = %v, %v; want the %v built-in", src, tmpl, err, want)
		}
	}
	if _, err := Parse("{% for m in messages %}[INST] {{ m.content }"); err == nil || !strings.Contains(err.Error(), "unknown chat template") {
		t.Errorf("unknown unparseable template: %v", err)
	}
	tmpl, err := Parse("{% if messages|length == 0 %}{{ raise_exception('need a message') }}{% endif %}ok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, Options{}); err == nil || !strings.Contains(err.Error(), "need a message") {
		t.Errorf("raise_exception: %v", err)
	}
	if s, err := tmpl.Render([]Message{{Role: "user", Content: "x"}}, Options{}); err != nil || s != "ok" {
		t.Errorf("Render = %q, %v", s, err)
	}
}

// TestVars passes Qwen3's enable_thinking, which closes an empty think block.
func TestVars(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	got, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}})
	want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if err != nil || got != want {
		t.Errorf("enable_thinking=false: %q, %v; want %q", got, err, want)
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2026, 3, 9, 7, 5, 3, 0, time.UTC)
	for f, want := range map[string]string{
		"%d %b %Y":          "09 Mar 2026",
		"%-d %B %y":         "9 March 26",
		"%Y-%m-%d %H:%M:%S": "2026-03-09 07:05:03",
		"%a %A %j %I%p %e":  "Mon Monday 068 07AM  9",
		"100%% %Q %":        "100% %Q %",
	} {
		if got := strftime(tm, f); got != want {
			t.Errorf("strftime(%q) = %q, want %q", f, got, want)
		}
	}
}

// TestConcurrentRender renders one template from several goroutines (run with -race).
func TestConcurrentRender(t *testing.T) {
	src, _ := os.ReadFile("testdata/templates/llama3.1.jinja")
	tmpl, err := Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
	want, _ := tmpl.Render(msgs, Options{AddGenerationPrompt: true})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true}); err != nil || got != want {
					t.Errorf("concurrent render: %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
