// Command retemplate copies a GGUF file with its tokenizer.chat_template replaced by the
// text of a template file. `kernelrt synth` writes a plain ChatML template, which shows no
// tools; tools/openai-node/run.sh gives its model Qwen2.5's template (Hermes <tool_call>
// convention) so the server accepts tools.
//
//	go run ./tools/openai-node/retemplate -in tiny.gguf -template qwen2.5.jinja -out tools.gguf
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/kernelrt/kernelrt/gguf"
)

const templateKey = "tokenizer.chat_template"

func main() {
	in := flag.String("in", "", "GGUF `FILE` to read")
	tmpl := flag.String("template", "", "chat template `FILE` (Jinja source)")
	out := flag.String("out", "", "GGUF `FILE` to write")
	flag.Parse()
	if err := run(*in, *tmpl, *out); err != nil {
		fmt.Fprintln(os.Stderr, "retemplate:", err)
		os.Exit(1)
	}
}

func run(in, tmpl, out string) error {
	switch {
	case in == "" || tmpl == "" || out == "":
		return errors.New("-in, -template and -out are required")
	case in == out:
		return fmt.Errorf("-out %s is the -in file: write a new one", out)
	}
	src, err := os.ReadFile(tmpl)
	if err != nil {
		return fmt.Errorf("-template: %w", err)
	}
	if len(src) == 0 {
		return fmt.Errorf("-template %s is empty", tmpl)
	}
	f, err := gguf.Open(in)
	if err != nil {
		return fmt.Errorf("-in: %w", err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	if err := b.SetVersion(f.Version); err != nil {
		return err
	}
	replaced := false
	for _, kv := range f.Metadata {
		v := kv.Value
		if kv.Key == templateKey {
			v, replaced = gguf.String(string(src)), true
		}
		if err := b.AddKV(kv.Key, v); err != nil {
			return err
		}
	}
	if !replaced { // a file without a template gets one
		if err := b.AddKV(templateKey, gguf.String(string(src))); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		data, err := f.TensorData(t.Name)
		if err != nil {
			return err
		}
		if err := b.AddTensor(t.Name, t.Type, t.Dims, data); err != nil {
			return err
		}
	}
	w, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	_, err = b.WriteTo(w)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out) // no half-written model
		return fmt.Errorf("-out %s: %w", out, err)
	}
	return nil
}
