package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"unsafe"
)

// sampleTensor is a tensor of the sample files with its expected data.
type sampleTensor struct {
	name string
	typ  GGMLType
	dims []uint64
	data []byte
}

// sampleKVs has one KV of every value type, arrays of every element type, a nested array of
// mixed inner types, and values at the edges of their ranges.
func sampleKVs() []KV {
	return []KV{
		{"general.architecture", String("qwen2")},
		{"test.u8", Uint8(255)},
		{"test.i8", Int8(-128)},
		{"test.u16", Uint16(65535)},
		{"test.i16", Int16(-32768)},
		{"test.u32", Uint32(4294967295)},
		{"test.i32", Int32(-7)},
		{"test.f32", Float32(1e-6)},
		{"test.bool", Bool(true)},
		{"test.false", Bool(false)},
		{"test.string.empty", String("")},
		{"test.string.binary", String("\xff\xfe not utf-8 \x00")},
		{"test.u64", Uint64(math.MaxUint64)},
		{"test.i64", Int64(math.MinInt64)},
		{"test.f64", Float64(1e6)},
		{"arr.u8", ArrayValue(NewArray([]uint8{0, 1, 255}))},
		{"arr.i8", ArrayValue(NewArray([]int8{-128, 0, 127}))},
		{"arr.u16", ArrayValue(NewArray([]uint16{1, 65535}))},
		{"arr.i16", ArrayValue(NewArray([]int16{-32768, 32767}))},
		{"arr.u32", ArrayValue(NewArray([]uint32{7, 8, 9}))},
		{"arr.i32", ArrayValue(NewArray([]int32{-1, 1}))},
		{"arr.f32", ArrayValue(NewArray([]float32{-0.5, float32(math.Inf(1))}))},
		{"arr.bool", ArrayValue(NewArray([]bool{true, false, true}))},
		{"arr.string", ArrayValue(NewArray([]string{"a", "", "Ġhello", "\xe4\xb8"}))},
		{"arr.u64", ArrayValue(NewArray([]uint64{math.MaxUint64}))},
		{"arr.i64", ArrayValue(NewArray([]int64{math.MinInt64, 3}))},
		{"arr.f64", ArrayValue(NewArray([]float64{math.Pi}))},
		{"arr.empty", ArrayValue(NewArray([]int32{}))},
		{"arr.nested", ArrayValue(NewArray([]*Array{
			NewArray([]string{"x", "y"}),
			NewArray([]uint8{}),
			NewArray([]*Array{NewArray([]float32{2})}),
		}))},
	}
}

// pattern returns n bytes of a recognisable pattern seeded by seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func sampleTensors() []sampleTensor {
	return []sampleTensor{
		{"token_embd.weight", TypeQ8_0, []uint64{64, 3}, pattern(3*2*34, 1)},
		{"blk.0.attn_q.weight", TypeQ5_0, []uint64{32, 2}, pattern(2*22, 2)},
		{"output_norm.weight", TypeF32, []uint64{5}, pattern(20, 3)},
		{"blk.0.ffn_down.weight", TypeQ4_K, []uint64{256, 1, 1, 2}, pattern(2*144, 4)},
		{"scalar", TypeF16, nil, pattern(2, 5)},
		{"empty", TypeQ8_0, []uint64{0, 4}, nil},
		{"ids", TypeI32, []uint64{3}, pattern(12, 6)},
	}
}

// buildSample writes a file with the sample KVs and tensors.
func buildSample(t testing.TB, version uint32, align int) []byte {
	t.Helper()
	b := NewBuilder()
	if err := b.SetVersion(version); err != nil {
		t.Fatal(err)
	}
	if align != DefaultAlignment {
		if err := b.SetAlignment(align); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range sampleKVs() {
		if err := b.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range sampleTensors() {
		if err := b.AddTensor(st.name, st.typ, st.dims, st.data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	if _, size := b.Layout(); size != n {
		t.Fatalf("Layout size %d, wrote %d", size, n)
	}
	return buf.Bytes()
}

// equalValue compares values exactly (floats by bits, so NaN equals itself).
func equalValue(a, b Value) bool {
	if a.set != b.set || a.typ != b.typ || a.bits != b.bits || a.str != b.str {
		return false
	}
	if a.typ != ValueArray {
		return true
	}
	x, y := a.arr, b.arr
	if x.elem != y.elem || x.Len() != y.Len() {
		return false
	}
	for i := range x.Len() {
		if !equalValue(x.Index(i), y.Index(i)) {
			return false
		}
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		for _, align := range []int{1, 2, 32, 64, 4096} {
			t.Run(fmt.Sprintf("v%d/align%d", version, align), func(t *testing.T) {
				data := buildSample(t, version, align)
				f, err := Parse(data)
				if err != nil {
					t.Fatal(err)
				}
				if f.Version != version || f.Alignment != align {
					t.Fatalf("version %d alignment %d, want %d %d", f.Version, f.Alignment, version, align)
				}
				if f.DataOffset%align != 0 {
					t.Fatalf("data offset %d not aligned to %d", f.DataOffset, align)
				}
				want := sampleKVs()
				if align != DefaultAlignment {
					want = append([]KV{{AlignmentKey, Uint32(uint32(align))}}, want...)
				}
				if len(f.Metadata) != len(want) {
					t.Fatalf("%d KVs, want %d", len(f.Metadata), len(want))
				}
				for i, kv := range want {
					got := f.Metadata[i]
					if got.Key != kv.Key || !equalValue(got.Value, kv.Value) {
						t.Errorf("kv %d: got %s = %v, want %s = %v", i, got.Key, got.Value, kv.Key, kv.Value)
					}
				}
				sts := sampleTensors()
				if len(f.Tensors) != len(sts) {
					t.Fatalf("%d tensors, want %d", len(f.Tensors), len(sts))
				}
				for i, st := range sts {
					ti := f.Tensors[i]
					if ti.Name != st.name || ti.Type != st.typ || fmt.Sprint(ti.Dims) != fmt.Sprint(append([]uint64{}, st.dims...)) {
						t.Errorf("tensor %d: got %s %s %v, want %s %s %v", i, ti.Name, ti.Type, ti.Dims, st.name, st.typ, st.dims)
					}
					if ti.Offset%uint64(align) != 0 {
						t.Errorf("tensor %s offset %d not aligned to %d", ti.Name, ti.Offset, align)
					}
					got, err := f.TensorData(st.name)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, st.data) || uint64(len(got)) != ti.Size {
						t.Errorf("tensor %s: data differs (len %d, size %d, want %d)", st.name, len(got), ti.Size, len(st.data))
					}
				}
			})
		}
	}
}

// TestWriterLayoutMatchesGGML checks the exact bytes of a small file: offsets run in order,
// each tensor padded to the alignment, data section after padded infos, trailing padding.
func TestWriterLayoutMatchesGGML(t *testing.T) {
	b := NewBuilder()
	must(t, b.AddKV("k", Uint32(5)))
	must(t, b.AddTensor("a", TypeF32, []uint64{3}, pattern(12, 0)))
	must(t, b.AddTensor("b", TypeI8, []uint64{1}, []byte{9}))
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = append(want, "GGUF"...)
	want = append(want, le32(3)...)
	want = append(want, le64(2)...)
	want = append(want, le64(1)...)
	want = append(want, str("k")...)
	want = append(want, le32(uint32(ValueUint32))...)
	want = append(want, le32(5)...)
	want = append(want, info("a", []uint64{3}, uint32(TypeF32), 0)...)
	want = append(want, info("b", []uint64{1}, uint32(TypeI8), 32)...)
	want = append(want, make([]byte, 32*((len(want)+31)/32)-len(want))...)
	want = append(want, pattern(12, 0)...)
	want = append(want, make([]byte, 20)...)
	want = append(want, 9)
	want = append(want, make([]byte, 31)...)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("bytes differ:\n got %x\nwant %x", buf.Bytes(), want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLookupsAndAccessors(t *testing.T) {
	f, err := Parse(buildSample(t, 3, 32))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := f.GetString("general.architecture"); !ok || s != "qwen2" {
		t.Errorf("GetString = %q, %v", s, ok)
	}
	if _, ok := f.GetString("test.u8"); ok {
		t.Error("GetString on a uint8 succeeded")
	}
	// GetUint takes every integer type that is non-negative.
	for key, want := range map[string]uint64{"test.u8": 255, "test.u16": 65535, "test.u32": 4294967295, "test.u64": math.MaxUint64} {
		if v, ok := f.GetUint(key); !ok || v != want {
			t.Errorf("GetUint(%s) = %d, %v; want %d", key, v, ok, want)
		}
	}
	for _, key := range []string{"test.i8", "test.i16", "test.i32", "test.i64", "test.f32", "test.bool", "missing"} {
		if v, ok := f.GetUint(key); ok {
			t.Errorf("GetUint(%s) = %d, want failure (negative or not an integer)", key, v)
		}
	}
	for key, want := range map[string]int64{"test.i8": -128, "test.i16": -32768, "test.i32": -7, "test.i64": math.MinInt64, "test.u32": 4294967295} {
		if v, ok := f.GetInt(key); !ok || v != want {
			t.Errorf("GetInt(%s) = %d, %v; want %d", key, v, ok, want)
		}
	}
	if v, ok := f.GetInt("test.u64"); ok {
		t.Errorf("GetInt of MaxUint64 = %d, want failure", v)
	}
	if v, ok := f.GetFloat("test.f32"); !ok || v != float64(float32(1e-6)) {
		t.Errorf("GetFloat(f32) = %v, %v", v, ok)
	}
	if v, ok := f.GetFloat("test.f64"); !ok || v != 1e6 {
		t.Errorf("GetFloat(f64) = %v, %v", v, ok)
	}
	if _, ok := f.GetFloat("test.u32"); ok {
		t.Error("GetFloat on an integer succeeded")
	}
	if v, ok := f.GetBool("test.bool"); !ok || !v {
		t.Errorf("GetBool(true) = %v, %v", v, ok)
	}
	if v, ok := f.GetBool("test.false"); !ok || v {
		t.Errorf("GetBool(false) = %v, %v", v, ok)
	}
	a, ok := f.GetArray("arr.string")
	if !ok || a.Elem() != ValueString || a.Len() != 4 {
		t.Fatalf("GetArray(arr.string) = %v, %v", a, ok)
	}
	if s, ok := a.Strings(); !ok || strings.Join(s, "|") != "a||Ġhello|\xe4\xb8" {
		t.Errorf("Strings = %q, %v", s, ok)
	}
	if _, ok := a.Float32s(); ok {
		t.Error("Float32s on a string array succeeded")
	}
	if f32, _ := f.GetArray("arr.f32"); f32 != nil {
		if s, ok := f32.Float32s(); !ok || len(s) != 2 || s[0] != -0.5 || !math.IsInf(float64(s[1]), 1) {
			t.Errorf("Float32s = %v, %v", s, ok)
		}
	}
	n, _ := f.GetArray("arr.nested")
	sub, ok := n.Arrays()
	if !ok || len(sub) != 3 || sub[0].Elem() != ValueString || sub[1].Len() != 0 || sub[2].Elem() != ValueArray {
		t.Fatalf("nested = %v, %v", sub, ok)
	}
	if deep, _ := sub[2].Arrays(); len(deep) != 1 {
		t.Errorf("depth-3 array has %d elements", len(deep))
	} else if v, ok := deep[0].Index(0).AsFloat(); !ok || v != 2 {
		t.Errorf("deepest element = %v, %v", v, ok)
	}
	if e, ok := f.GetArray("arr.empty"); !ok || e.Len() != 0 || e.Elem() != ValueInt32 {
		t.Errorf("empty array = %v, %v", e, ok)
	} else if s, ok := e.Int32s(); !ok || s == nil {
		t.Errorf("Int32s of an empty array = %v, %v; want non-nil empty", s, ok)
	}

	ti, ok := f.Tensor("blk.0.attn_q.weight")
	if !ok || ti.Type != TypeQ5_0 || ti.Cols() != 32 || ti.Rows() != 2 || ti.Elements() != 64 || ti.RowBytes() != 22 || ti.Size != 44 {
		t.Fatalf("Tensor = %+v, %v", ti, ok)
	}
	if ti, _ := f.Tensor("blk.0.ffn_down.weight"); ti.Rows() != 2 || ti.Cols() != 256 || ti.Elements() != 512 {
		t.Errorf("4-dim tensor rows %d cols %d elements %d", ti.Rows(), ti.Cols(), ti.Elements())
	}
	if ti, _ := f.Tensor("scalar"); ti.Rows() != 1 || ti.Cols() != 1 || ti.Elements() != 1 || ti.Size != 2 {
		t.Errorf("scalar rows %d cols %d elements %d size %d", ti.Rows(), ti.Cols(), ti.Elements(), ti.Size)
	}
	if ti, _ := f.Tensor("empty"); ti.Rows() != 4 || ti.Elements() != 0 || ti.Size != 0 {
		t.Errorf("empty rows %d elements %d size %d", ti.Rows(), ti.Elements(), ti.Size)
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("Tensor(nope) found")
	}
	if _, err := f.TensorData("nope"); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Errorf("TensorData(nope) error = %v", err)
	}
}

func TestTensorDataIsZeroCopy(t *testing.T) {
	data := buildSample(t, 3, 32)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		b, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		start := f.DataOffset + int(ti.Offset)
		if &b[0] != &data[start] {
			t.Errorf("tensor %s: data is not a sub-slice of the input at offset %d", ti.Name, start)
		}
		if cap(b) != len(b) {
			t.Errorf("tensor %s: cap %d > len %d lets appends overwrite the next tensor", ti.Name, cap(b), len(b))
		}
	}
	// Writing through the input shows up in the tensor: the same memory.
	b, _ := f.TensorData("output_norm.weight")
	data[f.DataOffset+int(f.Tensors[2].Offset)] ^= 0xff
	if b[0] != data[f.DataOffset+int(f.Tensors[2].Offset)] {
		t.Error("tensor data does not alias the input")
	}
	must(t, f.Close())
	if _, err := f.TensorData("output_norm.weight"); !errors.Is(err, ErrClosed) {
		t.Errorf("TensorData after Close = %v, want ErrClosed", err)
	}
	must(t, f.Close())
}

func TestCheckAligned(t *testing.T) {
	// Alignment 1 lets the F32 tensor start at an odd offset.
	b := NewBuilder()
	must(t, b.SetAlignment(1))
	must(t, b.AddTensor("byte", TypeI8, []uint64{1}, []byte{1}))
	must(t, b.AddTensor("f", TypeF32, []uint64{2}, pattern(8, 0)))
	must(t, b.AddTensor("none", TypeF32, []uint64{0}, nil))
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	// Copy into 8-aligned memory so absolute addresses follow file offsets.
	mem := make([]uint64, (buf.Len()+7)/8)
	data := unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), buf.Len())
	copy(data, buf.Bytes())
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("f")
	off := f.DataOffset + int(ti.Offset)
	if off%2 == 0 {
		t.Fatalf("test setup: tensor f at even offset %d", off)
	}
	must(t, f.CheckAligned(ti, 1))
	err = f.CheckAligned(ti, 4)
	if err == nil || !strings.Contains(err.Error(), `tensor "f"`) || !strings.Contains(err.Error(), "not 4-byte aligned") ||
		!strings.Contains(err.Error(), fmt.Sprintf("file offset %d", off)) {
		t.Errorf("CheckAligned(4) = %v", err)
	}
	none, _ := f.Tensor("none")
	must(t, f.CheckAligned(none, 64))
	if err := f.CheckAligned(ti, 3); err == nil || !strings.Contains(err.Error(), "align 3 is not a positive power of two") {
		t.Errorf("CheckAligned(3) = %v", err)
	}
	// With the default alignment, 8-aligned memory gives aligned tensors.
	g, err := Parse(buildSample(t, 3, 32))
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Tensors {
		must(t, g.CheckAligned(&g.Tensors[i], 4))
	}
}

func TestGGMLTypeTable(t *testing.T) {
	cases := []struct {
		t         GGMLType
		name      string
		blk, size int
	}{
		{TypeF32, "F32", 1, 4}, {TypeF16, "F16", 1, 2}, {TypeQ4_0, "Q4_0", 32, 18}, {TypeQ4_1, "Q4_1", 32, 20},
		{TypeQ5_0, "Q5_0", 32, 22}, {TypeQ5_1, "Q5_1", 32, 24}, {TypeQ8_0, "Q8_0", 32, 34}, {TypeQ8_1, "Q8_1", 32, 36},
		{TypeQ2_K, "Q2_K", 256, 84}, {TypeQ3_K, "Q3_K", 256, 110}, {TypeQ4_K, "Q4_K", 256, 144},
		{TypeQ5_K, "Q5_K", 256, 176}, {TypeQ6_K, "Q6_K", 256, 210}, {TypeQ8_K, "Q8_K", 256, 292},
		{TypeI8, "I8", 1, 1}, {TypeI16, "I16", 1, 2}, {TypeI32, "I32", 1, 4}, {TypeI64, "I64", 1, 8},
		{TypeF64, "F64", 1, 8}, {TypeBF16, "BF16", 1, 2}, {TypeIQ4_NL, "IQ4_NL", 32, 18}, {TypeMXFP4, "MXFP4", 32, 17},
	}
	for _, c := range cases {
		if !c.t.Known() || c.t.String() != c.name || c.t.BlockSize() != c.blk || c.t.TypeSize() != c.size {
			t.Errorf("%d: %s %d %d, want %s %d %d", c.t, c.t, c.t.BlockSize(), c.t.TypeSize(), c.name, c.blk, c.size)
		}
	}
	// The two formats kernelrt computes with must match formats.md.
	if TypeQ8_0.TypeSize() != 2+32 || TypeQ5_0.TypeSize() != 2+4+16 {
		t.Error("Q8_0/Q5_0 block sizes differ from formats.md")
	}
	for _, id := range []GGMLType{4, 5, 31, 40, 1000} {
		if id.Known() || id.BlockSize() != 0 || id.String() != fmt.Sprintf("type(%d)", id) {
			t.Errorf("removed/unknown type %d reported as known (%s)", id, id)
		}
	}
	if ValueFloat64.String() != "float64" || ValueType(13).String() != "value_type(13)" {
		t.Errorf("value type names: %s %s", ValueFloat64, ValueType(13))
	}
}

func TestBuilderRefuses(t *testing.T) {
	cases := []struct {
		name string
		do   func(b *Builder) error
		want string
	}{
		{"version 1", func(b *Builder) error { return b.SetVersion(1) }, "version 1 not supported"},
		{"alignment 0", func(b *Builder) error { return b.SetAlignment(0) }, "alignment 0 out of range"},
		{"alignment 48", func(b *Builder) error { return b.SetAlignment(48) }, "= 48 is not a power of two"},
		{"alignment huge", func(b *Builder) error { return b.SetAlignment(MaxAlignment * 2) }, "out of range"},
		{"alignment kv type", func(b *Builder) error { return b.AddKV(AlignmentKey, Uint64(32)) }, "has type uint64, want uint32"},
		{"empty key", func(b *Builder) error { return b.AddKV("", Uint8(1)) }, "empty key"},
		{"bad utf8 key", func(b *Builder) error { return b.AddKV("\xff", Uint8(1)) }, "not valid UTF-8"},
		{"long key", func(b *Builder) error { return b.AddKV(strings.Repeat("k", MaxKeyLen+1), Uint8(1)) }, "exceeds limit 65535"},
		{"duplicate key", func(b *Builder) error { b.AddKV("a", Uint8(1)); return b.AddKV("a", Uint8(2)) }, `duplicate key "a"`},
		{"zero value", func(b *Builder) error { return b.AddKV("a", Value{}) }, "invalid (zero) Value"},
		{"nil array", func(b *Builder) error { return b.AddKV("a", ArrayValue(nil)) }, "invalid (zero) Value"},
		{"bare array", func(b *Builder) error { return b.AddKV("a", ArrayValue(&Array{})) }, "not made by NewArray"},
		{"nil nested", func(b *Builder) error { return b.AddKV("a", ArrayValue(NewArray([]*Array{nil}))) }, "array element 0 is nil"},
		{"too deep", func(b *Builder) error { return b.AddKV("a", ArrayValue(nestedArray(MaxArrayDepth+1))) }, "nested 9 deep, limit 8"},
		{"empty name", func(b *Builder) error { return b.AddTensor("", TypeF32, []uint64{1}, make([]byte, 4)) }, "empty tensor name"},
		{"long name", func(b *Builder) error {
			return b.AddTensor(strings.Repeat("n", 65), TypeF32, []uint64{1}, make([]byte, 4))
		}, "of 65 bytes exceeds limit 64"},
		{"duplicate tensor", func(b *Builder) error {
			b.AddTensor("t", TypeF32, []uint64{1}, make([]byte, 4))
			return b.AddTensor("t", TypeF32, []uint64{1}, make([]byte, 4))
		}, `duplicate tensor name "t"`},
		{"unknown type", func(b *Builder) error { return b.AddTensor("t", 4, []uint64{1}, nil) }, "unknown ggml type 4"},
		{"5 dims", func(b *Builder) error { return b.AddTensor("t", TypeF32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)) }, "5 dims exceeds limit 4"},
		{"partial block", func(b *Builder) error { return b.AddTensor("t", TypeQ8_0, []uint64{48}, nil) }, "row length 48 is not a multiple of the Q8_0 block size 32"},
		{"wrong data length", func(b *Builder) error { return b.AddTensor("t", TypeQ8_0, []uint64{32, 2}, make([]byte, 34)) }, "data has 34 bytes, Q8_0 dims [32 2] need 68"},
		{"nil func", func(b *Builder) error { return b.AddTensorFunc("t", TypeF32, []uint64{1}, nil) }, "nil write func"},
	}
	for _, c := range cases {
		err := c.do(NewBuilder())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func nestedArray(depth int) *Array {
	a := NewArray([]uint8{1})
	for range depth - 1 {
		a = NewArray([]*Array{a})
	}
	return a
}

func TestSetAlignmentReplaces(t *testing.T) {
	b := NewBuilder()
	must(t, b.SetAlignment(64))
	must(t, b.SetAlignment(16))
	if b.Alignment() != 16 || len(b.kvs) != 1 {
		t.Fatalf("alignment %d with %d KVs, want 16 with 1", b.Alignment(), len(b.kvs))
	}
	must(t, b.AddTensor("t", TypeF32, []uint64{1}, make([]byte, 4)))
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 16 || f.DataOffset%16 != 0 || buf.Len()%16 != 0 {
		t.Fatalf("alignment %d, data offset %d, size %d", f.Alignment, f.DataOffset, buf.Len())
	}
}

func TestAddTensorFuncStreams(t *testing.T) {
	b := NewBuilder()
	want := pattern(64*34, 9)
	must(t, b.AddTensorFunc("w", TypeQ8_0, []uint64{64, 32}, func(w io.Writer) error {
		// Small pieces, as a generator would produce them row by row.
		for i := 0; i < len(want); i += 34 {
			if _, err := w.Write(want[i : i+34]); err != nil {
				return err
			}
		}
		return nil
	}))
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := f.TensorData("w")
	if !bytes.Equal(got, want) {
		t.Fatal("streamed tensor data differs")
	}

	short := NewBuilder()
	must(t, short.AddTensorFunc("s", TypeF32, []uint64{4}, func(w io.Writer) error {
		_, err := w.Write(make([]byte, 12))
		return err
	}))
	if _, err := short.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), `tensor "s": write func wrote 12 bytes, want 16`) {
		t.Errorf("short write func: %v", err)
	}
	long := NewBuilder()
	must(t, long.AddTensorFunc("l", TypeF32, []uint64{1}, func(w io.Writer) error {
		_, err := w.Write(make([]byte, 8))
		return err
	}))
	if _, err := long.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "write of 8 bytes exceeds the 4 bytes left") {
		t.Errorf("long write func: %v", err)
	}
	failing := NewBuilder()
	boom := errors.New("boom")
	must(t, failing.AddTensorFunc("f", TypeF32, []uint64{1}, func(io.Writer) error { return boom }))
	if _, err := failing.WriteTo(io.Discard); !errors.Is(err, boom) {
		t.Errorf("failing write func: %v, want boom wrapped", err)
	}
}

func TestEmptyFile(t *testing.T) {
	// No KVs and no tensors: the header alone, padded, is a valid file; so is the bare header.
	var buf bytes.Buffer
	n, err := NewBuilder().WriteTo(&buf)
	if err != nil || n != 32 {
		t.Fatalf("WriteTo = %d, %v; want 32 bytes", n, err)
	}
	for _, data := range [][]byte{buf.Bytes(), buf.Bytes()[:headerSize]} {
		f, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Metadata) != 0 || len(f.Tensors) != 0 {
			t.Fatalf("%d KVs %d tensors", len(f.Metadata), len(f.Tensors))
		}
	}
}

func TestValueString(t *testing.T) {
	for _, c := range []struct {
		v    Value
		want string
	}{
		{Int8(-3), "-3"}, {Uint64(7), "7"}, {Float32(0.5), "0.5"}, {Bool(true), "true"},
		{String("a\n"), `"a\n"`}, {ArrayValue(NewArray([]string{"a", "b"})), "[2 x string]"}, {Value{}, "<invalid>"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("String() = %s, want %s", got, c.want)
		}
	}
}
