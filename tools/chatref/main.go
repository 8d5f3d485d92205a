// Command chatref writes the expected renderings of chat/testdata: for every template in
// templates/ and every case of cases.json, the prompt llama.cpp's llama-server renders with
// --jinja (POST /apply-template, which always adds the generation prompt).
//
//	go run ./tools/chatref -server /path/to/llama-server [-testdata chat/testdata]
//
// It also renders the cases with llama.cpp's built-in chatml and llama3 formats
// (expected/builtin-*), the reference of chat.Builtin.
//
// llama-server needs a model: chatref writes a tiny synthetic Qwen2 GGUF with a byte-level
// vocabulary holding the special tokens, whose BOS and EOS text are what the template sees
// as bos_token and eos_token (Qwen's <|endoftext|> and <|im_end|>, Llama 3 Instruct's
// <|begin_of_text|> and <|eot_id|>). The server listens on 127.0.0.1 only and is stopped
// after each template. Templates that call strftime_now get the server's local date: run
// with TZ=UTC; the date is recorded in expected/now.txt. A template llama.cpp cannot parse
// (it then renders ChatML instead) gets no expected files, only a line in
// expected/unparsed.txt: its reference is jinja2_ref.py's rendering alone.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// family is the special-token text a template family's GGUF carries.
type family struct{ bos, eos string }

var families = map[string]family{
	"qwen":  {"<|endoftext|>", "<|im_end|>"},
	"llama": {"<|begin_of_text|>", "<|eot_id|>"},
}

var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
	"<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}

func main() {
	server := flag.String("server", "", "path of llama-server")
	dir := flag.String("testdata", "chat/testdata", "the chat package's testdata directory")
	flag.Parse()
	if *server == "" {
		fmt.Fprintln(os.Stderr, "chatref: -server is required")
		os.Exit(2)
	}
	if err := run(*server, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "chatref:", err)
		os.Exit(1)
	}
}

type testCase struct {
	Name     string            `json:"name"`
	Messages []json.RawMessage `json:"messages"`
}

func run(server, dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		return err
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "chatref")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	models := map[string]string{}
	for name, f := range families {
		models[name] = filepath.Join(tmp, name+".gguf")
		if err := writeModel(models[name], f); err != nil {
			return err
		}
	}
	templates, err := filepath.Glob(filepath.Join(dir, "templates", "*.jinja"))
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "expected")
	date := time.Now().Format("2006-01-02")
	var unparsed []string
	type job struct {
		name, family string
		args         []string
	}
	var jobs []job
	for _, tf := range templates {
		name := strings.TrimSuffix(filepath.Base(tf), ".jinja")
		fam := "llama"
		if strings.HasPrefix(name, "qwen") {
			fam = "qwen"
		}
		jobs = append(jobs, job{name, fam, []string{"--jinja", "--chat-template-file", tf}})
	}
	// llama.cpp's built-in formats (its own C++ code, no Jinja), for chat.Builtin.
	jobs = append(jobs, job{"builtin-chatml", "qwen", []string{"--chat-template", "chatml"}},
		job{"builtin-llama3", "llama", []string{"--chat-template", "llama3"}})
	for _, j := range jobs {
		name := j.name
		if err := serve(server, models[j.family], j.args, func(url string, log *syncBuffer) error {
			os.RemoveAll(filepath.Join(out, name))
			if i := strings.Index(log.String(), "failed to parse chat template"); i >= 0 {
				msg, _, _ := strings.Cut(log.String()[i:], "\n")
				unparsed = append(unparsed, name+": "+msg)
				return nil
			}
			for _, c := range cases {
				prompt, err := applyTemplate(url, c.Messages)
				if err != nil {
					return fmt.Errorf("%s/%s: %w", name, c.Name, err)
				}
				p := filepath.Join(out, name, c.Name+".txt")
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(p, []byte(prompt), 0o644); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		fmt.Println("rendered", name)
	}
	if d := time.Now().Format("2006-01-02"); d != date {
		return fmt.Errorf("the date changed during the run (%s, %s): run again", date, d)
	}
	if err := os.WriteFile(filepath.Join(out, "unparsed.txt"), []byte(strings.Join(unparsed, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "now.txt"), []byte(date+"\n"), 0o644)
}

// serve runs llama-server on a free local port for the duration of fn.
func serve(server, model string, args []string, fn func(url string, log *syncBuffer) error) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log syncBuffer
	args = append([]string{"-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"-c", "256", "-t", "1", "-np", "1"}, args...)
	cmd := exec.Command(server, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get(url + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Since(start) > 60*time.Second {
			return fmt.Errorf("llama-server did not come up:\n%s", log.String())
		}
	}
	return fn(url, &log)
}

// syncBuffer is the server's output, written by exec's copying goroutine while serve reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// applyTemplate asks the server for the prompt of messages.
func applyTemplate(url string, messages []json.RawMessage) (string, error) {
	body, _ := json.Marshal(map[string]any{"messages": messages})
	r, err := http.Post(url+"/apply-template", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return "", err
	}
	if r.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %s", r.StatusCode, b)
	}
	var res struct {
		Prompt *string `json:"prompt"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Prompt == nil {
		return "", fmt.Errorf("unexpected answer %s (%v)", b, err)
	}
	return *res.Prompt, nil
}

// writeModel writes a one-layer synthetic Qwen2 GGUF whose byte-level BPE vocabulary is the
// 256 byte tokens, one merge and the special tokens, with f's BOS and EOS.
func writeModel(path string, f family) error {
	tokens := byteTokens()
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = 1 // normal
	}
	tokens = append(tokens, "ĠĠ")
	types = append(types, 1)
	id := map[string]uint32{}
	for _, s := range specials {
		id[s] = uint32(len(tokens))
		tokens = append(tokens, s)
		types = append(types, 3) // control
	}
	b := gguf.NewBuilder()
	for _, kv := range []struct {
		k string
		v gguf.Value
	}{
		{"tokenizer.ggml.model", gguf.String("gpt2")},
		{"tokenizer.ggml.pre", gguf.String("qwen2")},
		{"tokenizer.ggml.tokens", gguf.ArrayValue(gguf.NewArray(tokens))},
		{"tokenizer.ggml.token_type", gguf.ArrayValue(gguf.NewArray(types))},
		{"tokenizer.ggml.merges", gguf.ArrayValue(gguf.NewArray([]string{"Ġ Ġ"}))},
		{"tokenizer.ggml.bos_token_id", gguf.Uint32(id[f.bos])},
		{"tokenizer.ggml.eos_token_id", gguf.Uint32(id[f.eos])},
		{"tokenizer.ggml.add_bos_token", gguf.Bool(false)},
	} {
		if err := b.AddKV(kv.k, kv.v); err != nil {
			return err
		}
	}
	cfg := orchestrator.Config{Layers: 1, Hidden: 64, Intermediate: 128, Heads: 2, KVHeads: 1,
		HeadDim: 32, Vocab: len(tokens), RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 256, MaxBatch: 32}
	if err := orchestrator.SyntheticGGUF(b, cfg, orchestrator.RecipeQ8_0(), 1); err != nil {
		return err
	}
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// byteTokens is GPT-2's byte-to-unicode table: printable bytes stand for themselves, the
// rest map to U+0100 upwards, in byte order.
func byteTokens() []string {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	out := make([]string, 256)
	n := 0
	for b := range 256 {
		if printable(b) {
			out[b] = string(rune(b))
		} else {
			out[b] = string(rune(256 + n))
			n++
		}
	}
	return out
}
