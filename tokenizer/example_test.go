package tokenizer_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/tokenizer"
)

func Example() {
	// A model file would be opened with gguf.Open(path); the test vocabulary is gzipped.
	raw, _ := os.ReadFile("testdata/qwen3.gguf.gz")
	z, _ := gzip.NewReader(bytes.NewReader(raw))
	data, _ := io.ReadAll(z)
	f, err := gguf.Parse(data)
	if err != nil {
		panic(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		panic(err)
	}

	ids, _ := tok.Encode("Hello world, 你好!<|im_end|>", tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	fmt.Println(ids)
	fmt.Println(tok.IsEOG(ids[len(ids)-1]))

	// Stream the text back as tokens arrive: whole characters only.
	d := tok.NewStreamDecoder(false)
	for _, id := range ids {
		chunk, _ := d.Write(id)
		fmt.Printf("%q ", chunk)
	}
	fmt.Println()
	// Output:
	// [9707 1879 11 220 108386 0 151645]
	// true
	// "Hello" " world" "," " " "你好" "!" ""
}
