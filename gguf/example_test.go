package gguf_test

import (
	"bytes"
	"fmt"

	"github.com/kernelrt/kernelrt/gguf"
)

// Write a GGUF file with metadata and one tensor, then parse it back: Parse copies only
// metadata and tensor infos; TensorData returns the bytes in place.
func Example() {
	b := gguf.NewBuilder()
	b.AddKV("general.architecture", gguf.String("qwen2"))
	b.AddKV("qwen2.block_count", gguf.Uint32(24))
	data := make([]byte, 4*8)
	for i := range data {
		data[i] = byte(i)
	}
	if err := b.AddTensor("norm.weight", gguf.TypeF32, []uint64{8}, data); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		panic(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		panic(err)
	}
	arch, _ := f.GetString("general.architecture")
	n, _ := f.GetUint("qwen2.block_count")
	t, _ := f.Tensor("norm.weight")
	td, _ := f.TensorData("norm.weight")
	fmt.Println(arch, n, t.Type, t.Elements(), len(td))
	// Output: qwen2 24 F32 8 32
}
