package gguf

import "fmt"

// GGMLType is a tensor element type id as stored in a GGUF tensor info (ggml's enum ggml_type).
type GGMLType uint32

// Tensor element types. Ids 4, 5 and 31-33, 36-38 were used by formats ggml has since removed;
// files using them are refused as unknown.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
)

// typeTraits is the storage layout of one element type: BlockSize elements are stored in
// TypeSize bytes. Values match ggml's type_traits (and gguf-py's GGML_QUANT_SIZES).
type typeTraits struct {
	name      string
	blockSize int
	typeSize  int
}

var typeTable = map[GGMLType]typeTraits{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 18},
	TypeQ4_1:    {"Q4_1", 32, 20},
	TypeQ5_0:    {"Q5_0", 32, 22},
	TypeQ5_1:    {"Q5_1", 32, 24},
	TypeQ8_0:    {"Q8_0", 32, 34},
	TypeQ8_1:    {"Q8_1", 32, 36},
	TypeQ2_K:    {"Q2_K", 256, 84},
	TypeQ3_K:    {"Q3_K", 256, 110},
	TypeQ4_K:    {"Q4_K", 256, 144},
	TypeQ5_K:    {"Q5_K", 256, 176},
	TypeQ6_K:    {"Q6_K", 256, 210},
	TypeQ8_K:    {"Q8_K", 256, 292},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98},
	TypeIQ1_S:   {"IQ1_S", 256, 50},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18},
	TypeIQ3_S:   {"IQ3_S", 256, 110},
	TypeIQ2_S:   {"IQ2_S", 256, 82},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 56},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", 256, 54},
	TypeTQ2_0:   {"TQ2_0", 256, 66},
	TypeMXFP4:   {"MXFP4", 32, 17},
}

// Known reports whether t is in the type table, i.e. whether its storage size is known.
func (t GGMLType) Known() bool {
	_, ok := typeTable[t]
	return ok
}

// BlockSize is the number of elements stored together in one block (1 for plain types,
// 32 or 256 for quantized ones), or 0 for an unknown type.
func (t GGMLType) BlockSize() int { return typeTable[t].blockSize }

// TypeSize is the number of bytes of one block, or 0 for an unknown type.
func (t GGMLType) TypeSize() int { return typeTable[t].typeSize }

// String returns ggml's name of the type, e.g. "Q8_0", or "type(N)" for an unknown id.
func (t GGMLType) String() string {
	if tt, ok := typeTable[t]; ok {
		return tt.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ValueType is the type tag of a metadata value (GGUF's gguf_metadata_value_type).
type ValueType uint32

// Metadata value types, numbered as in the GGUF specification.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

// valid reports whether t is one of the thirteen types of the specification.
func (t ValueType) valid() bool { return t <= ValueFloat64 }

// String returns the specification's name of the type, e.g. "uint32", or "value_type(N)".
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

// fixedSize is the encoded size of a scalar of type t, or 0 for string and array, whose size
// depends on their content.
func (t ValueType) fixedSize() int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take: used to bound counts by the
// bytes left before allocating.
func (t ValueType) minSize() int {
	switch t {
	case ValueString:
		return 8 // length only
	case ValueArray:
		return 4 + 8 // element type and length
	}
	return t.fixedSize()
}
