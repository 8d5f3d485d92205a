package gguf

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/internal/testutil"
)

// Raw encoders: hostile files are built byte by byte, since the Builder refuses to write them.

func le16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }
func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
func le64(v uint64) []byte { return append(le32(uint32(v)), le32(uint32(v>>32))...) }
func str(s string) []byte  { return append(le64(uint64(len(s))), s...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// header is magic, version 3 and the two counts.
func header(nTensors, nKV uint64) []byte {
	return cat([]byte("GGUF"), le32(3), le64(nTensors), le64(nKV))
}

// kv encodes a key, a type tag and a payload.
func kv(key string, t ValueType, payload ...[]byte) []byte {
	return cat(str(key), le32(uint32(t)), cat(payload...))
}

// arr encodes an array payload: element type, length, elements.
func arr(elem ValueType, n uint64, elems ...[]byte) []byte {
	return cat(le32(uint32(elem)), le64(n), cat(elems...))
}

func info(name string, dims []uint64, typ uint32, off uint64) []byte {
	b := cat(str(name), le32(uint32(len(dims))))
	for _, d := range dims {
		b = append(b, le64(d)...)
	}
	return cat(b, le32(typ), le64(off))
}

// tensorFile is a file with the given KVs and tensor infos, padded to align, then dataLen
// bytes of data.
func tensorFile(kvs [][]byte, infos [][]byte, align, dataLen int) []byte {
	b := cat(header(uint64(len(infos)), uint64(len(kvs))), cat(kvs...), cat(infos...))
	b = append(b, make([]byte, (align-len(b)%align)%align)...)
	return append(b, make([]byte, dataLen)...)
}

func nestedArrayBytes(depth int) []byte {
	b := arr(ValueUint8, 1, []byte{7})
	for range depth - 1 {
		b = arr(ValueArray, 1, b)
	}
	return b
}

func TestHostile(t *testing.T) {
	one := [][]byte{info("t", []uint64{8}, uint32(TypeF32), 0)}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "need 4 bytes for the magic, have 0"},
		{"short magic", []byte("GG"), "need 4 bytes for the magic, have 2"},
		{"wrong magic", cat([]byte("GGML"), le32(3), le64(0), le64(0)), `bad magic "GGML", want "GGUF"`},
		{"version 1", cat([]byte("GGUF"), le32(1), le32(0), le32(0)), "unsupported version 1 (32-bit counts)"},
		{"version 0", cat([]byte("GGUF"), le32(0), le64(0), le64(0)), "unsupported version 0; only versions 2 and 3"},
		{"version 4", cat([]byte("GGUF"), le32(4), le64(0), le64(0)), "unsupported version 4; only versions 2 and 3"},
		{"big-endian", cat([]byte("GGUF"), []byte{0, 0, 0, 3}, le64(0), le64(0)), "unsupported version 50331648: a big-endian file (version 3 byte-swapped)"},
		{"short counts", cat([]byte("GGUF"), le32(3), le64(0)), "kv count: unexpected end of file: need 8 bytes, 0 left"},
		{"kv count", header(0, 1000000), "kv count 1000000 exceeds what the 0 bytes left can hold (at most 0)"},
		{"kv count max", cat(header(0, math.MaxUint64), make([]byte, 140)), "kv count 18446744073709551615 exceeds what the 140 bytes left can hold (at most 10)"},
		{"tensor count", cat(header(1<<40, 0), make([]byte, 50)), "tensor count 1099511627776 exceeds what the 50 bytes left can hold (at most 2)"},
		{"tensor count after kvs", cat(header(2, 1), kv("key.a", ValueString, str(strings.Repeat("x", 40)))),
			"tensor count 2 exceeds what the 0 bytes left after the metadata can hold (at most 0)"},
		{"key length", cat(header(0, 1), le64(1<<62), make([]byte, 20)), "kv 0: key: string length 4611686018427387904 exceeds the 20 bytes left"},
		{"empty key", cat(header(0, 1), kv("", ValueUint8, []byte{1}), make([]byte, 4)), "kv 0: empty key"},
		{"bad utf8 key", cat(header(0, 1), kv("a\xffb", ValueUint8, []byte{1})), `kv 0: key "a\xffb" is not valid UTF-8`},
		{"duplicate key", cat(header(0, 2), kv("a.b", ValueUint8, []byte{1}), kv("a.b", ValueUint8, []byte{2})), `duplicate key "a.b" (kv 0 and kv 1)`},
		{"unknown value type", cat(header(0, 1), kv("k", 13, []byte{1})), `key "k": unknown value type 13 (want 0..12)`},
		{"bool 2", cat(header(0, 1), kv("k", ValueBool, []byte{2})), `key "k": bool byte is 2, want 0 or 1`},
		{"bool array 7", cat(header(0, 1), kv("k", ValueArray, arr(ValueBool, 3, []byte{1, 0, 7}))), `key "k": array element 2: bool byte is 7`},
		{"string length", cat(header(0, 1), kv("k", ValueString, le64(1000), []byte("abc"))), `key "k": string length 1000 exceeds the 3 bytes left`},
		{"string length max", cat(header(0, 1), kv("k", ValueString, le64(math.MaxUint64), []byte("abc"))), "string length 18446744073709551615 exceeds the 3 bytes left"},
		{"truncated u32", cat(header(0, 1), kv("k", ValueUint32, []byte{1, 2})), `key "k": unexpected end of file: need 4 bytes, 2 left`},
		{"array elem type", cat(header(0, 1), kv("k", ValueArray, le32(99), le64(0))), `key "k": array element type 99 is not a value type`},
		{"array length", cat(header(0, 1), kv("k", ValueArray, arr(ValueUint32, 1000000000), make([]byte, 16))),
			`key "k": array of 1000000000 uint32 exceeds the 16 bytes left (at most 4 elements of at least 4 bytes)`},
		{"array length max", cat(header(0, 1), kv("k", ValueArray, arr(ValueUint64, math.MaxUint64), make([]byte, 16))), "array of 18446744073709551615 uint64 exceeds"},
		{"string array length", cat(header(0, 1), kv("k", ValueArray, arr(ValueString, 5), str("a"), str("b"))),
			"array of 5 string exceeds the 18 bytes left (at most 2 elements of at least 8 bytes)"},
		{"string array element", cat(header(0, 1), kv("k", ValueArray, arr(ValueString, 2), str("ab"), le64(100), make([]byte, 10))),
			`key "k": array element 1: string length 100 exceeds the 10 bytes left`},
		{"array of arrays length", cat(header(0, 1), kv("k", ValueArray, arr(ValueArray, 3), arr(ValueUint8, 0))),
			"array of 3 array exceeds the 12 bytes left (at most 1 elements of at least 12 bytes)"},
		{"nested array bad", cat(header(0, 1), kv("k", ValueArray, arr(ValueArray, 2, arr(ValueUint8, 0), arr(ValueInt8, 9), make([]byte, 4)))),
			`key "k": array element 1: array of 9 int8 exceeds the 4 bytes left`},
		{"nesting depth", cat(header(0, 1), kv("k", ValueArray, nestedArrayBytes(MaxArrayDepth+1))), `key "k": array element 0: array element 0:`},
		{"alignment type", tensorFile([][]byte{kv(AlignmentKey, ValueUint64, le64(32))}, nil, 32, 0), "general.alignment has type uint64, want uint32"},
		{"alignment 0", tensorFile([][]byte{kv(AlignmentKey, ValueUint32, le32(0))}, nil, 32, 0), "general.alignment = 0 is not a power of two"},
		{"alignment 24", tensorFile([][]byte{kv(AlignmentKey, ValueUint32, le32(24))}, nil, 32, 0), "general.alignment = 24 is not a power of two"},
		{"alignment huge", tensorFile([][]byte{kv(AlignmentKey, ValueUint32, le32(1<<31))}, nil, 32, 0), "general.alignment = 2147483648 exceeds limit 1048576"},
		{"empty tensor name", tensorFile(nil, [][]byte{info("", []uint64{1}, 0, 0)}, 32, 32), "tensor info 0: empty tensor name"},
		{"long tensor name", tensorFile(nil, [][]byte{info(strings.Repeat("n", 65), []uint64{1}, 0, 0)}, 32, 32), "of 65 bytes exceeds limit 64"},
		{"bad utf8 tensor name", tensorFile(nil, [][]byte{info("w\xc0", []uint64{1}, 0, 0)}, 32, 32), `tensor info 0: tensor name "w\xc0" is not valid UTF-8`},
		{"tensor name length", cat(header(1, 0), le64(1<<40), make([]byte, 30)), "at offset 24: tensor info 0: name: string length 1099511627776 exceeds the 30 bytes left"},
		{"duplicate tensor", tensorFile(nil, [][]byte{info("t", []uint64{1}, 0, 0), info("t", []uint64{1}, 0, 32)}, 32, 64),
			`duplicate tensor name "t" (tensor 0 and tensor 1)`},
		{"n_dims 5", tensorFile(nil, [][]byte{info("t", []uint64{1, 1, 1, 1, 1}, 0, 0)}, 32, 32), `tensor "t": n_dims 5 exceeds limit 4`},
		{"n_dims huge", cat(header(1, 0), str("t"), le32(math.MaxUint32), make([]byte, 40)), `tensor "t": n_dims 4294967295 exceeds limit 4`},
		{"unknown type", tensorFile(nil, [][]byte{info("t", []uint64{1}, 4, 0)}, 32, 32), `tensor "t": unknown ggml type 4`},
		{"unknown type big", tensorFile(nil, [][]byte{info("t", []uint64{1}, 1<<31, 0)}, 32, 32), `tensor "t": unknown ggml type 2147483648`},
		{"offset unaligned", tensorFile(nil, [][]byte{info("t", []uint64{1}, 0, 16)}, 32, 64), `tensor "t": data offset 16 is not a multiple of the alignment 32`},
		{"data past end", tensorFile(nil, one, 32, 31), `tensor "t": data [0, 32) of the data section at file offset 64 runs past the end of the file (95 bytes, data section 31 bytes)`},
		{"offset past end", tensorFile(nil, [][]byte{info("t", []uint64{1}, 0, 1<<63)}, 32, 64), `tensor "t": data [9223372036854775808, 9223372036854775812)`},
		{"offset+size wraps", tensorFile(nil, [][]byte{info("t", []uint64{1 << 40}, uint32(TypeI8), math.MaxUint64&^31)}, 32, 64), "runs past the end of the file"},
		{"no data section", tensorFile(nil, one, 1, 0), `tensor "t": data [0, 32) of the data section at file offset 64 runs past the end of the file (57 bytes, data section 0 bytes)`},
		{"elements overflow", tensorFile(nil, [][]byte{info("t", []uint64{1 << 32, 1 << 32}, uint32(TypeI8), 0)}, 32, 0),
			`tensor "t": dims [4294967296 4294967296]: element count overflows`},
		{"elements overflow with zero", tensorFile(nil, [][]byte{info("t", []uint64{0, 1 << 40, 1 << 40}, uint32(TypeI8), 0)}, 32, 0), "element count overflows"},
		{"elements overflow max", tensorFile(nil, [][]byte{info("t", []uint64{math.MaxUint64}, uint32(TypeI8), 0)}, 32, 0), "element count overflows"},
		{"bytes overflow", tensorFile(nil, [][]byte{info("t", []uint64{1 << 61}, uint32(TypeF64), 0)}, 32, 0), `tensor "t": dims [2305843009213693952]: byte size of F64 data overflows`},
		{"bytes overflow rows", tensorFile(nil, [][]byte{info("t", []uint64{1 << 31, 1 << 31}, uint32(TypeF32), 0)}, 32, 0), "byte size of F32 data overflows"},
		{"partial block", tensorFile(nil, [][]byte{info("t", []uint64{33, 2}, uint32(TypeQ8_0), 0)}, 32, 0), `tensor "t": dims [33 2]: row length 33 is not a multiple of the Q8_0 block size 32`},
		{"scalar quantized", tensorFile(nil, [][]byte{info("t", nil, uint32(TypeQ4_K), 0)}, 32, 0), "row length 1 is not a multiple of the Q4_K block size 256"},
		{"overlap", tensorFile(nil, [][]byte{info("a", []uint64{16}, 0, 0), info("b", []uint64{8}, 0, 32)}, 32, 96),
			`tensors "a" [0, 64) and "b" [32, 64) overlap in the data section`},
		{"same offset", tensorFile(nil, [][]byte{info("a", []uint64{8}, 0, 32), info("b", []uint64{8}, 0, 32)}, 32, 96), `tensors "a" [32, 64) and "b" [32, 64) overlap`},
		{"truncated info", cat(header(1, 0), str("t"), le32(2), le64(5), make([]byte, 7)), `tensor "t": dim 1: unexpected end of file: need 8 bytes, 7 left`},
	}
	for _, c := range cases {
		f, err := Parse(c.data)
		if err == nil {
			t.Errorf("%s: parsed (%d tensors), want error containing %q", c.name, len(f.Tensors), c.want)
			continue
		}
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %T %v is not a *FormatError", c.name, err, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got  %v\n want it to contain %q", c.name, err, c.want)
		}
	}
}

// TestNestingDepthLimit checks the exact depth limit: MaxArrayDepth levels parse, one more not.
func TestNestingDepthLimit(t *testing.T) {
	ok := cat(header(0, 1), kv("k", ValueArray, nestedArrayBytes(MaxArrayDepth)))
	if _, err := Parse(ok); err != nil {
		t.Fatalf("depth %d: %v", MaxArrayDepth, err)
	}
	bad := cat(header(0, 1), kv("k", ValueArray, nestedArrayBytes(MaxArrayDepth+1)))
	_, err := Parse(bad)
	if err == nil || !strings.Contains(err.Error(), "arrays nested 9 deep, limit 8") {
		t.Fatalf("depth %d: %v", MaxArrayDepth+1, err)
	}
	// A deep nest that lies about lengths is stopped by the byte bound, not recursion.
	deep := cat(header(0, 1), le64(1), []byte("k"), le32(uint32(ValueArray)))
	for range 100000 {
		deep = append(deep, arr(ValueArray, 1)...)
	}
	if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "deep, limit 8") {
		t.Fatalf("deep nest: %v", err)
	}
}

// TestAllowedEdgeShapes: what the rules allow must parse.
func TestAllowedEdgeShapes(t *testing.T) {
	data := tensorFile(nil, [][]byte{
		info("scalar", nil, uint32(TypeF32), 0),                       // no dims: one element
		info("zero", []uint64{0}, uint32(TypeQ8_0), 32),               // empty, and may share its offset
		info("zero2", []uint64{32, 0, 1 << 40}, uint32(TypeQ8_0), 32), // a zero dim with huge others
		info("gap", []uint64{2}, uint32(TypeF32), 64),                 // gap before it
		info("before", []uint64{1}, uint32(TypeF32), 32),              // out of order
	}, 32, 72)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"scalar": 4, "zero": 0, "zero2": 0, "gap": 8, "before": 4}
	for name, size := range want {
		ti, ok := f.Tensor(name)
		if !ok || ti.Size != size {
			t.Errorf("%s: %+v, want size %d", name, ti, size)
		}
		if b, err := f.TensorData(name); err != nil || uint64(len(b)) != size {
			t.Errorf("%s: data len %d, %v", name, len(b), err)
		}
	}
	if z, _ := f.Tensor("zero2"); z.Elements() != 0 || z.Rows() != 0 {
		t.Errorf("zero2: elements %d rows %d", z.Elements(), z.Rows())
	}
}

// TestNonUTF8StringValues: string values are bytes, kept as they are.
func TestNonUTF8StringValues(t *testing.T) {
	data := cat(header(0, 2), kv("s", ValueString, str("\xff\x80")), kv("a", ValueArray, arr(ValueString, 1, str("\xe4\xb8"))))
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.GetString("s"); s != "\xff\x80" {
		t.Errorf("s = %q", s)
	}
	a, _ := f.GetArray("a")
	if s, _ := a.Strings(); len(s) != 1 || s[0] != "\xe4\xb8" {
		t.Errorf("a = %q", s)
	}
}

// truncationMsg matches the messages a cut-short file may give: a read past the end, a count
// or length bigger than the bytes left, or tensor data past the end.
var truncationMsg = regexp.MustCompile(`unexpected end of file|exceeds the \d+ bytes left|exceeds what the \d+ bytes left|runs past the end of the file|need 4 bytes for the magic`)

// TestTruncatedEverywhere cuts a valid file at every byte offset. Every cut before the end of
// the last tensor's data must fail with an error about the missing bytes; cuts inside the final
// padding lose nothing and must parse to the same tensors. The cut file sits at the end of a
// guarded region, so any read past it faults.
func TestTruncatedEverywhere(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		full := buildSample(t, version, 32)
		ref, err := Parse(full)
		if err != nil {
			t.Fatal(err)
		}
		end := 0
		for _, ti := range ref.Tensors {
			end = max(end, ref.DataOffset+int(ti.Offset+ti.Size))
		}
		if end >= len(full) {
			t.Fatalf("test setup: no trailing padding (end %d, len %d)", end, len(full))
		}
		g, err := testutil.NewGuarded(len(full))
		if err != nil {
			t.Fatal(err)
		}
		for cut := 0; cut < len(full); cut++ {
			data := g.Tail(cut)
			copy(data, full)
			f, err := Parse(data)
			if cut < end {
				if err == nil {
					t.Fatalf("v%d cut at %d of %d: parsed", version, cut, len(full))
				}
				if !truncationMsg.MatchString(err.Error()) {
					t.Fatalf("v%d cut at %d: error does not say the file is short: %v", version, cut, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("v%d cut at %d (in trailing padding): %v", version, cut, err)
			}
			for _, ti := range ref.Tensors {
				a, _ := f.TensorData(ti.Name)
				b, _ := ref.TensorData(ti.Name)
				if !bytes.Equal(a, b) {
					t.Fatalf("v%d cut at %d: tensor %s differs", version, cut, ti.Name)
				}
			}
		}
		must(t, g.Close())
	}
}

// TestHugeCountsAllocateNothing: counts near 2^64 in a tiny file are refused before any
// allocation sized by them.
func TestHugeCountsAllocateNothing(t *testing.T) {
	inputs := [][]byte{
		cat(header(math.MaxUint64, 0), make([]byte, 64)),
		cat(header(0, math.MaxUint64), make([]byte, 64)),
		cat(header(0, 1), kv("k", ValueArray, arr(ValueString, math.MaxUint64/8))),
		cat(header(0, 1), kv("k", ValueArray, arr(ValueArray, math.MaxUint64/12))),
		cat(header(0, 1), kv("k", ValueString, le64(math.MaxUint64-1))),
	}
	for i, in := range inputs {
		allocs := testing.AllocsPerRun(5, func() { Parse(in) })
		// A handful of allocations for the error and the File; nothing proportional to a count
		// (which would be gigabytes and fail outright).
		if allocs > 20 {
			t.Errorf("input %d: %v allocations", i, allocs)
		}
		if _, err := Parse(in); err == nil {
			t.Errorf("input %d parsed", i)
		}
	}
}
