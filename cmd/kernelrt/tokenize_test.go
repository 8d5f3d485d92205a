package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vocabFile writes one of the tokenizer package's test vocabularies (vocabulary-only GGUF
// files, gzipped there) to a temporary file.
func vocabFile(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", name+".gguf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenize(t *testing.T) {
	qwen, llama3 := vocabFile(t, "qwen3"), vocabFile(t, "llama3")
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.txt")
	// Read as bytes: a backslash-n stays two characters, the invalid byte stays a byte.
	if err := os.WriteFile(raw, []byte(`a\nb`+"\n\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Expected ids are llama-tokenize's (llama.cpp c392e509) on the same files.
	cases := []struct {
		args       []string
		want       string
		warnStderr bool
	}{
		{[]string{"-model", qwen, "-p", "Hello world<|im_end|>"}, "[9707, 1879, 151645]\n", false},
		{[]string{"-model", qwen, "-p", "Hello world<|im_end|>", "-no-special"}, "[9707, 1879, 27, 91, 318, 6213, 91, 29]\n", false},
		{[]string{"-model", qwen, "-p", ""}, "[]\n", false},
		{[]string{"-model", llama3, "-p", "Hello world"}, "[128000, 9906, 1917]\n", false},
		{[]string{"-model", llama3, "-p", "Hello world", "-no-bos"}, "[9906, 1917]\n", false},
		{[]string{"-model", llama3, "-p", ""}, "[128000]\n", false},
		{[]string{"-model", qwen, "-f", raw}, "[64, 1699, 65, 198, 5691]\n", true},
	}
	for _, c := range cases {
		code, stdout, stderr := run(append([]string{"tokenize"}, c.args...)...)
		if code != 0 || stdout != c.want {
			t.Errorf("tokenize %q: exit %d, stdout %q, stderr %q; want %q", c.args, code, stdout, stderr, c.want)
		}
		if c.warnStderr != strings.Contains(stderr, "not valid UTF-8") {
			t.Errorf("tokenize %q: stderr %q", c.args, stderr)
		}
	}

	notGGUF := filepath.Join(dir, "not.gguf")
	os.WriteFile(notGGUF, []byte("hello"), 0o644)
	errs := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-p", "x"}, 2, "-model is required"},
		{[]string{"-model", qwen}, 2, "exactly one of -p TEXT and -f FILE"},
		{[]string{"-model", qwen, "-p", "x", "-f", raw}, 2, "exactly one of -p TEXT and -f FILE"},
		{[]string{"-model", qwen, "-f", filepath.Join(dir, "missing.txt")}, 1, "no such file"},
		{[]string{"-model", filepath.Join(dir, "missing.gguf"), "-p", "x"}, 1, "no such file"},
		{[]string{"-model", notGGUF, "-p", "x"}, 1, "gguf"},
		{[]string{"-model", qwen, "-p", "x", "y"}, 2, "unexpected arguments"},
	}
	for _, c := range errs {
		code, stdout, stderr := run(append([]string{"tokenize"}, c.args...)...)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("tokenize %q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, c.want)
		}
	}
	if code, _, stderr := run("tokenize", "-h"); code != 0 || !strings.Contains(stderr, "-no-special") {
		t.Errorf("tokenize -h: exit %d, %q", code, stderr)
	}
}
