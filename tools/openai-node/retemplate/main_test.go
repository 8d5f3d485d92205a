package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
)

// run copies every KV and tensor, with the template replaced (or added) and nothing else
// changed; bad arguments are errors, not a half-written file.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4*8)
	for i := range data {
		data[i] = byte(i * 7)
	}
	write := func(name string, withTemplate bool) string {
		b := gguf.NewBuilder()
		must(t, b.AddKV("general.architecture", gguf.String("qwen2")))
		if withTemplate {
			must(t, b.AddKV(templateKey, gguf.String("{{ old }}")))
		}
		must(t, b.AddKV("tokenizer.ggml.tokens", gguf.ArrayValue(gguf.NewArray([]string{"a", "b", "<|im_end|>"}))))
		must(t, b.AddTensor("w", gguf.TypeF32, []uint64{4, 2}, data))
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		must(t, err)
		_, err = b.WriteTo(f)
		must(t, err)
		must(t, f.Close())
		return path
	}
	tmpl := filepath.Join(dir, "t.jinja")
	must(t, os.WriteFile(tmpl, []byte("{%- if tools %}<tool_call>{% endif %}"), 0o644))
	for _, with := range []bool{true, false} {
		in := write("in.gguf", with)
		out := filepath.Join(dir, "out.gguf")
		must(t, run(in, tmpl, out))
		f, err := gguf.Open(out)
		must(t, err)
		if s, _ := f.GetString(templateKey); s != "{%- if tools %}<tool_call>{% endif %}" {
			t.Errorf("template %q", s)
		}
		if s, _ := f.GetString("general.architecture"); s != "qwen2" {
			t.Errorf("architecture %q", s)
		}
		v, _ := f.Get("tokenizer.ggml.tokens")
		a, _ := v.AsArray()
		if toks, _ := a.Strings(); !slices.Equal(toks, []string{"a", "b", "<|im_end|>"}) {
			t.Errorf("tokens %q", toks)
		}
		if got, err := f.TensorData("w"); err != nil || !bytes.Equal(got, data) || len(f.Tensors) != 1 {
			t.Errorf("tensor: %v, %d tensors, equal %v", err, len(f.Tensors), bytes.Equal(got, data))
		}
		f.Close()
	}
	in := write("in.gguf", true)
	for _, args := range [][3]string{{"", tmpl, "x"}, {in, tmpl, in}, {in, filepath.Join(dir, "none"), filepath.Join(dir, "o2")},
		{filepath.Join(dir, "none.gguf"), tmpl, filepath.Join(dir, "o3")}} {
		if err := run(args[0], args[1], args[2]); err == nil {
			t.Errorf("run%q: no error", args)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
