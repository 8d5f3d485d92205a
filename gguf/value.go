package gguf

import (
	"fmt"
	"math"
)

// KV is one metadata entry, in file order.
type KV struct {
	Key   string
	Value Value
}

// Value is one typed metadata value. The zero Value is invalid (Valid reports false); make
// values with the constructors (Uint32, String, ArrayValue, ...) or get them from a parsed File.
type Value struct {
	typ  ValueType
	set  bool
	bits uint64 // integers (signed ones sign-extended), bool as 0/1, floats as IEEE bits
	str  string
	arr  *Array
}

// Uint8 makes a uint8 value.
func Uint8(v uint8) Value { return Value{typ: ValueUint8, set: true, bits: uint64(v)} }

// Int8 makes an int8 value.
func Int8(v int8) Value { return Value{typ: ValueInt8, set: true, bits: uint64(int64(v))} }

// Uint16 makes a uint16 value.
func Uint16(v uint16) Value { return Value{typ: ValueUint16, set: true, bits: uint64(v)} }

// Int16 makes an int16 value.
func Int16(v int16) Value { return Value{typ: ValueInt16, set: true, bits: uint64(int64(v))} }

// Uint32 makes a uint32 value.
func Uint32(v uint32) Value { return Value{typ: ValueUint32, set: true, bits: uint64(v)} }

// Int32 makes an int32 value.
func Int32(v int32) Value { return Value{typ: ValueInt32, set: true, bits: uint64(int64(v))} }

// Uint64 makes a uint64 value.
func Uint64(v uint64) Value { return Value{typ: ValueUint64, set: true, bits: v} }

// Int64 makes an int64 value.
func Int64(v int64) Value { return Value{typ: ValueInt64, set: true, bits: uint64(v)} }

// Float32 makes a float32 value.
func Float32(v float32) Value {
	return Value{typ: ValueFloat32, set: true, bits: uint64(math.Float32bits(v))}
}

// Float64 makes a float64 value.
func Float64(v float64) Value { return Value{typ: ValueFloat64, set: true, bits: math.Float64bits(v)} }

// Bool makes a bool value.
func Bool(v bool) Value {
	var b uint64
	if v {
		b = 1
	}
	return Value{typ: ValueBool, set: true, bits: b}
}

// String makes a string value. GGUF strings are byte strings; s need not be UTF-8.
func String(s string) Value { return Value{typ: ValueString, set: true, str: s} }

// ArrayValue makes an array value. A nil a gives an invalid Value, refused by the Builder.
func ArrayValue(a *Array) Value {
	if a == nil {
		return Value{}
	}
	return Value{typ: ValueArray, set: true, arr: a}
}

// Valid reports whether v holds a value (the zero Value does not).
func (v Value) Valid() bool { return v.set }

// Type is the value's GGUF type; meaningless for an invalid Value.
func (v Value) Type() ValueType { return v.typ }

// isSigned and isUnsigned classify the integer types.
func (t ValueType) isSigned() bool {
	return t == ValueInt8 || t == ValueInt16 || t == ValueInt32 || t == ValueInt64
}

func (t ValueType) isUnsigned() bool {
	return t == ValueUint8 || t == ValueUint16 || t == ValueUint32 || t == ValueUint64
}

// AsUint returns an integer value of any width or signedness as a uint64; false for other types
// and for negative values, so callers need not care which integer type a converter chose.
func (v Value) AsUint() (uint64, bool) {
	switch {
	case !v.set:
		return 0, false
	case v.typ.isUnsigned():
		return v.bits, true
	case v.typ.isSigned() && int64(v.bits) >= 0:
		return v.bits, true
	}
	return 0, false
}

// AsInt returns an integer value of any width or signedness as an int64; false for other types
// and for a uint64 above math.MaxInt64.
func (v Value) AsInt() (int64, bool) {
	switch {
	case !v.set:
		return 0, false
	case v.typ.isSigned():
		return int64(v.bits), true
	case v.typ.isUnsigned() && v.bits <= math.MaxInt64:
		return int64(v.bits), true
	}
	return 0, false
}

// AsFloat returns a float32 or float64 value as a float64; false for other types (integers are
// not converted: a float key stored as an integer is a converter bug worth seeing).
func (v Value) AsFloat() (float64, bool) {
	switch {
	case !v.set:
		return 0, false
	case v.typ == ValueFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case v.typ == ValueFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// AsBool returns a bool value; false as second result for other types.
func (v Value) AsBool() (b, ok bool) {
	if !v.set || v.typ != ValueBool {
		return false, false
	}
	return v.bits != 0, true
}

// AsString returns a string value; false for other types.
func (v Value) AsString() (string, bool) {
	if !v.set || v.typ != ValueString {
		return "", false
	}
	return v.str, true
}

// AsArray returns an array value; false for other types.
func (v Value) AsArray() (*Array, bool) {
	if !v.set || v.typ != ValueArray {
		return nil, false
	}
	return v.arr, true
}

// String formats the value for messages; arrays are summarised as "[N x type]".
func (v Value) String() string {
	if !v.set {
		return "<invalid>"
	}
	switch {
	case v.typ.isSigned():
		return fmt.Sprint(int64(v.bits))
	case v.typ.isUnsigned():
		return fmt.Sprint(v.bits)
	}
	switch v.typ {
	case ValueFloat32, ValueFloat64:
		f, _ := v.AsFloat()
		return fmt.Sprint(f)
	case ValueBool:
		return fmt.Sprint(v.bits != 0)
	case ValueString:
		return fmt.Sprintf("%q", v.str)
	case ValueArray:
		return fmt.Sprintf("[%d x %s]", v.arr.Len(), v.arr.elem)
	}
	return "<invalid>"
}

// Array is a metadata array: a length and elements all of one type. Elements are held in a
// typed slice (e.g. []string for a vocabulary) so callers get them without conversion; an array
// of arrays holds []*Array, whose members may each have their own element type. The typed
// getters return the array's own storage (no copy): do not modify it.
type Array struct {
	elem ValueType
	data any
}

// ArrayElem lists the Go types an Array can be built from, one per GGUF value type.
type ArrayElem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string |
		uint64 | int64 | float64 | *Array
}

// NewArray makes an array whose element type follows from T. The slice is kept, not copied:
// do not modify it while the array is in use.
func NewArray[T ArrayElem](elems []T) *Array {
	var t ValueType
	switch any(elems).(type) {
	case []uint8:
		t = ValueUint8
	case []int8:
		t = ValueInt8
	case []uint16:
		t = ValueUint16
	case []int16:
		t = ValueInt16
	case []uint32:
		t = ValueUint32
	case []int32:
		t = ValueInt32
	case []float32:
		t = ValueFloat32
	case []bool:
		t = ValueBool
	case []string:
		t = ValueString
	case []uint64:
		t = ValueUint64
	case []int64:
		t = ValueInt64
	case []float64:
		t = ValueFloat64
	case []*Array:
		t = ValueArray
	}
	if elems == nil {
		elems = []T{} // keeps typed getters returning a non-nil, empty slice
	}
	return &Array{elem: t, data: elems}
}

// Elem is the type of the elements.
func (a *Array) Elem() ValueType { return a.elem }

// Len is the number of elements.
func (a *Array) Len() int {
	switch d := a.data.(type) {
	case []uint8:
		return len(d)
	case []int8:
		return len(d)
	case []uint16:
		return len(d)
	case []int16:
		return len(d)
	case []uint32:
		return len(d)
	case []int32:
		return len(d)
	case []float32:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	case []uint64:
		return len(d)
	case []int64:
		return len(d)
	case []float64:
		return len(d)
	case []*Array:
		return len(d)
	}
	return 0
}

// Index returns element i as a Value. Like slice indexing it panics if i is out of range
// (a caller bug; a file's content cannot cause it).
func (a *Array) Index(i int) Value {
	switch d := a.data.(type) {
	case []uint8:
		return Uint8(d[i])
	case []int8:
		return Int8(d[i])
	case []uint16:
		return Uint16(d[i])
	case []int16:
		return Int16(d[i])
	case []uint32:
		return Uint32(d[i])
	case []int32:
		return Int32(d[i])
	case []float32:
		return Float32(d[i])
	case []bool:
		return Bool(d[i])
	case []string:
		return String(d[i])
	case []uint64:
		return Uint64(d[i])
	case []int64:
		return Int64(d[i])
	case []float64:
		return Float64(d[i])
	case []*Array:
		return ArrayValue(d[i])
	}
	panic(fmt.Sprintf("gguf: Array.Index(%d) on an invalid array", i))
}

// slice returns the elements if they are of type []T.
func slice[T any](a *Array) ([]T, bool) {
	if a == nil {
		return nil, false
	}
	s, ok := a.data.([]T)
	return s, ok
}

// Uint8s returns the elements of a uint8 array; false for other element types.
func (a *Array) Uint8s() ([]uint8, bool) { return slice[uint8](a) }

// Int8s returns the elements of an int8 array; false for other element types.
func (a *Array) Int8s() ([]int8, bool) { return slice[int8](a) }

// Uint16s returns the elements of a uint16 array; false for other element types.
func (a *Array) Uint16s() ([]uint16, bool) { return slice[uint16](a) }

// Int16s returns the elements of an int16 array; false for other element types.
func (a *Array) Int16s() ([]int16, bool) { return slice[int16](a) }

// Uint32s returns the elements of a uint32 array; false for other element types.
func (a *Array) Uint32s() ([]uint32, bool) { return slice[uint32](a) }

// Int32s returns the elements of an int32 array; false for other element types.
func (a *Array) Int32s() ([]int32, bool) { return slice[int32](a) }

// Float32s returns the elements of a float32 array; false for other element types.
func (a *Array) Float32s() ([]float32, bool) { return slice[float32](a) }

// Bools returns the elements of a bool array; false for other element types.
func (a *Array) Bools() ([]bool, bool) { return slice[bool](a) }

// Strings returns the elements of a string array; false for other element types.
func (a *Array) Strings() ([]string, bool) { return slice[string](a) }

// Uint64s returns the elements of a uint64 array; false for other element types.
func (a *Array) Uint64s() ([]uint64, bool) { return slice[uint64](a) }

// Int64s returns the elements of an int64 array; false for other element types.
func (a *Array) Int64s() ([]int64, bool) { return slice[int64](a) }

// Float64s returns the elements of a float64 array; false for other element types.
func (a *Array) Float64s() ([]float64, bool) { return slice[float64](a) }

// Arrays returns the elements of an array of arrays; false for other element types.
func (a *Array) Arrays() ([]*Array, bool) { return slice[*Array](a) }
