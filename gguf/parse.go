package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/kernelrt/kernelrt/arena"
)

// Limits applied while parsing (and by the Builder, so that what it writes parses).
const (
	// DefaultAlignment is the data alignment of a file without general.alignment.
	DefaultAlignment = 32
	// MaxAlignment bounds general.alignment: large enough for 64 KiB pages and then some, small
	// enough that padding stays negligible.
	MaxAlignment = 1 << 20
	// MaxDims is the most dimensions a tensor can have (ggml's GGML_MAX_DIMS).
	MaxDims = 4
	// MaxTensorNameLen is the longest tensor name in bytes, as the specification says.
	MaxTensorNameLen = 64
	// MaxKeyLen is the longest metadata key in bytes (the specification's 2^16-1).
	MaxKeyLen = 1<<16 - 1
	// MaxArrayDepth is how deeply arrays may nest (an array of scalars has depth 1); it bounds
	// recursion on hostile input.
	MaxArrayDepth = 8
)

// AlignmentKey is the metadata key that sets the data alignment; its value must be a uint32.
const AlignmentKey = "general.alignment"

const (
	headerSize = 4 + 4 + 8 + 8 // magic, version, tensor count, kv count
	// minTensorInfoSize is the smallest encoded tensor info: name length with a 1-byte name,
	// n_dims, type, offset (no dims). Tensor counts are bounded by bytes left / this.
	minTensorInfoSize = 8 + 1 + 4 + 4 + 8
	// minKVSize is the smallest encoded KV: key length with a 1-byte key, value type, and a
	// 1-byte value.
	minKVSize = 8 + 1 + 4 + 1
)

// DefaultMaxMetadataBytes is the memory the metadata and tensor infos of one file may take
// unless Limits says otherwise: 256 MiB, about ten times what the largest real vocabularies
// need (a 256k-token vocabulary with merges takes ~25 MiB), and far less than a hostile file
// of a few hundred MB could otherwise make Parse allocate (up to 5.4 times its size).
const DefaultMaxMetadataBytes = 256 << 20

// Limits bounds what parsing may allocate.
type Limits struct {
	// MaxMetadataBytes caps the Go heap memory that the metadata and tensor infos may take,
	// estimated from the counts and lengths in the file before anything is allocated.
	// 0 means DefaultMaxMetadataBytes; a negative value means no cap beyond the file size.
	MaxMetadataBytes int
}

// ErrMetadataLimit is wrapped by the *FormatError for a file whose metadata would take more
// memory than Limits.MaxMetadataBytes.
var ErrMetadataLimit = errors.New("gguf: metadata exceeds the memory limit")

// FormatError reports a malformed or unsupported GGUF file: where, and what is wrong with the
// numbers involved.
type FormatError struct {
	Offset int64  // byte offset in the file at which the problem was found
	Msg    string // what is wrong
	Err    error  // a sentinel for errors.Is (ErrMetadataLimit), or nil
}

// Error formats the problem with its offset.
func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: at offset %d: %s", e.Offset, e.Msg)
}

// Unwrap returns the sentinel the error carries, if any.
func (e *FormatError) Unwrap() error { return e.Err }

// ErrClosed is returned by a File's data accessors after Close.
var ErrClosed = errors.New("gguf: file is closed")

func errAt(off int, format string, a ...any) error {
	return &FormatError{Offset: int64(off), Msg: fmt.Sprintf(format, a...)}
}

// wrap prefixes a FormatError's message with context (which key, which tensor) known only to
// the caller, keeping the offset; it formats only on the error path.
func wrap(err error, format string, a ...any) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		return &FormatError{Offset: fe.Offset, Msg: fmt.Sprintf(format, a...) + ": " + fe.Msg, Err: fe.Err}
	}
	return err
}

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] is the innermost, contiguous
// dimension (the row length), so a PyTorch weight of shape [rows, cols] is stored with
// Dims = [cols, rows].
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64 // byte offset of the data from the start of the data section
	Size   uint64 // bytes of data: Rows() * Cols()/BlockSize * TypeSize
}

// Elements is the number of elements (the product of Dims; 1 for a tensor with no dims).
// Parse guarantees it fits in an int.
func (t *TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// Cols is the row length Dims[0] (1 for a tensor with no dims).
func (t *TensorInfo) Cols() int {
	if len(t.Dims) == 0 {
		return 1
	}
	return int(t.Dims[0])
}

// Rows is the number of rows: the product of Dims[1:] (1 for a tensor with fewer than 2 dims).
func (t *TensorInfo) Rows() int {
	n := 1
	for _, d := range t.Dims[min(1, len(t.Dims)):] {
		n *= int(d)
	}
	return n
}

// RowBytes is the byte length of one row: Cols()/BlockSize blocks of TypeSize bytes.
func (t *TensorInfo) RowBytes() int {
	return t.Cols() / t.Type.BlockSize() * t.Type.TypeSize()
}

// File is a parsed GGUF file. Metadata and tensor infos are copied out of the input (they stay
// valid after Close); tensor data is not: TensorData returns sub-slices of the parsed bytes.
// A File is read-only and safe for concurrent use, except that Close must not race with other
// calls.
type File struct {
	Version    uint32
	Alignment  int  // data alignment: general.alignment or DefaultAlignment
	DataOffset int  // file offset of the data section
	Metadata   []KV // in file order
	Tensors    []TensorInfo
	data       []byte // the whole file
	kvIndex    map[string]int
	tensorIdx  map[string]int
	closer     func() error
	mapping    *arena.FileMapping
}

// reader is a cursor over the file bytes; every read checks the bytes left first.
type reader struct {
	b    []byte
	pos  int
	used int // estimated heap bytes the parsed metadata takes so far
	max  int // cap on used; <= 0: none
}

// Estimated heap cost of parsed items beyond their variable-length bytes. mapEntryCost is one
// slot of a map from string to int (key, value, control byte, load-factor and power-of-two
// slack), measured at 36-44 bytes for 20k-200k entries.
const (
	mapEntryCost = 48
	kvCost       = int(unsafe.Sizeof(KV{})) + mapEntryCost
	arrayCost    = int(unsafe.Sizeof(Array{})) + int(unsafe.Sizeof([]byte{})) // the Array and its boxed slice header
	// tensorCost: the TensorInfo, its index entry, and the offset and overlap-check slots.
	tensorCost = int(unsafe.Sizeof(TensorInfo{})) + mapEntryCost + 2*int(unsafe.Sizeof(0))
)

// charge accounts for count items of size bytes about to be allocated for what, and refuses
// them if the total would pass the cap.
func (r *reader) charge(count, size int, what func() string) error {
	hi, n := bits.Mul64(uint64(count), uint64(size))
	if r.max <= 0 {
		r.used += int(n) // bounded by a small multiple of the file size
		return nil
	}
	if hi != 0 || n > uint64(r.max-r.used) {
		return &FormatError{Offset: int64(r.pos), Err: ErrMetadataLimit,
			Msg: fmt.Sprintf("%s would take the metadata past %d bytes of memory (%d used before it; the cap is Limits.MaxMetadataBytes)",
				what(), r.max, r.used)}
	}
	r.used += int(n)
	return nil
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) need(n int) error {
	if n > r.left() {
		return errAt(r.pos, "unexpected end of file: need %d bytes, %d left", n, r.left())
	}
	return nil
}

func (r *reader) u8() (uint8, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	v := r.b[r.pos]
	r.pos++
	return v, nil
}

func (r *reader) u16() (uint16, error) {
	if err := r.need(2); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(r.b[r.pos:])
	r.pos += 2
	return v, nil
}

func (r *reader) u32() (uint32, error) {
	if err := r.need(4); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return v, nil
}

func (r *reader) u64() (uint64, error) {
	if err := r.need(8); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.b[r.pos:])
	r.pos += 8
	return v, nil
}

// strBytes reads a length-prefixed string and returns its bytes without copying; the length is
// checked against the bytes left before use.
func (r *reader) strBytes() ([]byte, error) {
	lenOff := r.pos
	n, err := r.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.left()) {
		return nil, errAt(lenOff, "string length %d exceeds the %d bytes left", n, r.left())
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// value reads a value of type t; depth is the number of enclosing arrays.
func (r *reader) value(t ValueType, depth int) (Value, error) {
	switch t {
	case ValueString:
		s, err := r.strBytes()
		if err != nil {
			return Value{}, err
		}
		if err := r.charge(len(s), 1, func() string { return "a string" }); err != nil {
			return Value{}, err
		}
		return String(string(s)), nil
	case ValueArray:
		a, err := r.array(depth + 1)
		if err != nil {
			return Value{}, err
		}
		return ArrayValue(a), nil
	case ValueBool:
		off := r.pos
		b, err := r.u8()
		if err != nil {
			return Value{}, err
		}
		if b > 1 {
			return Value{}, errAt(off, "bool byte is %d, want 0 or 1", b)
		}
		return Bool(b == 1), nil
	}
	if !t.valid() {
		return Value{}, errAt(r.pos-4, "unknown value type %d (want 0..12)", uint32(t))
	}
	var v uint64
	var err error
	switch t.fixedSize() {
	case 1:
		var x uint8
		x, err = r.u8()
		v = uint64(x)
	case 2:
		var x uint16
		x, err = r.u16()
		v = uint64(x)
	case 4:
		var x uint32
		x, err = r.u32()
		v = uint64(x)
	default:
		v, err = r.u64()
	}
	if err != nil {
		return Value{}, err
	}
	switch t {
	case ValueInt8:
		v = uint64(int64(int8(v)))
	case ValueInt16:
		v = uint64(int64(int16(v)))
	case ValueInt32:
		v = uint64(int64(int32(v)))
	}
	return Value{typ: t, set: true, bits: v}, nil
}

// array reads an array's element type, length and elements; depth is its own nesting level.
func (r *reader) array(depth int) (*Array, error) {
	start := r.pos
	if depth > MaxArrayDepth {
		return nil, errAt(start, "arrays nested %d deep, limit %d", depth, MaxArrayDepth)
	}
	et, err := r.u32()
	if err != nil {
		return nil, err
	}
	t := ValueType(et)
	if !t.valid() {
		return nil, errAt(start, "array element type %d is not a value type (want 0..12)", et)
	}
	lenOff := r.pos
	n64, err := r.u64()
	if err != nil {
		return nil, err
	}
	// Bound the length by the bytes left before allocating anything for it.
	if lim := uint64(r.left() / t.minSize()); n64 > lim {
		return nil, errAt(lenOff, "array of %d %s exceeds the %d bytes left (at most %d elements of at least %d bytes)",
			n64, t, r.left(), lim, t.minSize())
	}
	n, sz := int(n64), t.fixedSize()
	if err := r.charge(1, arrayCost, func() string { return "an array" }); err != nil {
		return nil, err
	}
	if err := r.charge(n, goElemSize(t), func() string { return fmt.Sprintf("an array of %d %s", n, t) }); err != nil {
		return nil, err
	}
	switch t {
	case ValueUint8:
		return NewArray(fixedArray(r, n, sz, func(b []byte) uint8 { return b[0] })), nil
	case ValueInt8:
		return NewArray(fixedArray(r, n, sz, func(b []byte) int8 { return int8(b[0]) })), nil
	case ValueUint16:
		return NewArray(fixedArray(r, n, sz, binary.LittleEndian.Uint16)), nil
	case ValueInt16:
		return NewArray(fixedArray(r, n, sz, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })), nil
	case ValueUint32:
		return NewArray(fixedArray(r, n, sz, binary.LittleEndian.Uint32)), nil
	case ValueInt32:
		return NewArray(fixedArray(r, n, sz, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })), nil
	case ValueFloat32:
		return NewArray(fixedArray(r, n, sz, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })), nil
	case ValueUint64:
		return NewArray(fixedArray(r, n, sz, binary.LittleEndian.Uint64)), nil
	case ValueInt64:
		return NewArray(fixedArray(r, n, sz, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })), nil
	case ValueFloat64:
		return NewArray(fixedArray(r, n, sz, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })), nil
	case ValueBool:
		s := make([]bool, n)
		for i := range s {
			if b := r.b[r.pos+i]; b > 1 {
				return nil, errAt(r.pos+i, "array element %d: bool byte is %d, want 0 or 1", i, b)
			}
			s[i] = r.b[r.pos+i] == 1
		}
		r.pos += n
		return NewArray(s), nil
	case ValueString:
		return r.stringArray(n)
	}
	s := make([]*Array, n)
	for i := range s {
		a, err := r.array(depth + 1)
		if err != nil {
			return nil, wrap(err, "array element %d", i)
		}
		s[i] = a
	}
	return NewArray(s), nil
}

// goElemSize is the bytes one element of an array of t takes in Go.
func goElemSize(t ValueType) int {
	switch t {
	case ValueString:
		return int(unsafe.Sizeof(""))
	case ValueArray:
		return int(unsafe.Sizeof((*Array)(nil)))
	case ValueBool:
		return 1
	}
	return t.fixedSize()
}

// fixedArray decodes n elements of size bytes each; the caller has checked that n*size bytes
// are left.
func fixedArray[T any](r *reader, n, size int, dec func([]byte) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = dec(r.b[r.pos+i*size:])
	}
	r.pos += n * size
	return s
}

// stringArray reads n strings into one shared allocation: a vocabulary is ~150k small strings,
// and one backing buffer instead of 150k allocations keeps Parse fast. The first pass validates
// every length against the bytes left, so the buffer is bounded by the file size.
func (r *reader) stringArray(n int) (*Array, error) {
	start := r.pos
	for i := range n {
		if _, err := r.strBytes(); err != nil {
			return nil, wrap(err, "array element %d", i)
		}
	}
	total := r.pos - start - 8*n
	r.pos = start
	// The bytes, and the lengths (temporary, but alive at the peak).
	if err := r.charge(1, total+8*n, func() string { return fmt.Sprintf("the %d bytes of %d strings", total, n) }); err != nil {
		return nil, err
	}
	var sb strings.Builder
	sb.Grow(total)
	lens := make([]int, n)
	for i := range n {
		b, _ := r.strBytes() // validated above
		sb.Write(b)
		lens[i] = len(b)
	}
	all := sb.String()
	s := make([]string, n)
	at := 0
	for i, l := range lens {
		s[i] = all[at : at+l]
		at += l
	}
	return NewArray(s), nil
}

// Parse parses a GGUF file held in data (typically a read-only file mapping). Tensor data is not
// copied: TensorData returns sub-slices of data, which must stay valid and unmodified while the
// File is used. Any malformed input gives a *FormatError naming the problem; Parse does not
// panic and allocates at most a small multiple of len(data), and at most about
// DefaultMaxMetadataBytes for the metadata and tensor infos (see ParseLimited).
func Parse(data []byte) (*File, error) { return ParseLimited(data, Limits{}) }

// ParseLimited is Parse with explicit limits: a file whose metadata and tensor infos would
// take more than l.MaxMetadataBytes of memory is refused, before the allocation, with a
// *FormatError wrapping ErrMetadataLimit.
func ParseLimited(data []byte, l Limits) (*File, error) {
	r := &reader{b: data, max: l.MaxMetadataBytes}
	if r.max == 0 {
		r.max = DefaultMaxMetadataBytes
	}
	return r.parse()
}

// parse parses r.b; afterwards r.used is the estimate tests compare with the real allocation.
func (r *reader) parse() (*File, error) {
	data := r.b
	if len(data) < 4 {
		return nil, errAt(0, "unexpected end of file: need 4 bytes for the magic, have %d", len(data))
	}
	if string(data[:4]) != "GGUF" {
		return nil, errAt(0, "bad magic %q, want \"GGUF\"", data[:4])
	}
	r.pos = 4
	version, err := r.u32()
	if err != nil {
		return nil, wrap(err, "version")
	}
	switch version {
	case 2, 3:
	case 1:
		return nil, errAt(4, "unsupported version 1 (32-bit counts); only versions 2 and 3 are supported")
	default:
		if sw := bits.ReverseBytes32(version); sw >= 1 && sw <= 3 {
			return nil, errAt(4, "unsupported version %d: a big-endian file (version %d byte-swapped); only little-endian is supported", version, sw)
		}
		return nil, errAt(4, "unsupported version %d; only versions 2 and 3 are supported", version)
	}
	f := &File{Version: version, data: data, Alignment: DefaultAlignment}

	countOff := r.pos
	nTensors, err := r.u64()
	if err != nil {
		return nil, wrap(err, "tensor count")
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, wrap(err, "kv count")
	}
	if lim := uint64(r.left() / minKVSize); nKV > lim {
		return nil, errAt(countOff+8, "kv count %d exceeds what the %d bytes left can hold (at most %d)", nKV, r.left(), lim)
	}
	if lim := uint64(r.left() / minTensorInfoSize); nTensors > lim {
		return nil, errAt(countOff, "tensor count %d exceeds what the %d bytes left can hold (at most %d)", nTensors, r.left(), lim)
	}

	if err := f.parseKVs(r, int(nKV)); err != nil {
		return nil, err
	}
	if err := f.parseTensorInfos(r, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) parseKVs(r *reader, n int) error {
	if err := r.charge(n, kvCost, func() string { return fmt.Sprintf("%d key-value pairs", n) }); err != nil {
		return err
	}
	f.Metadata = make([]KV, 0, n)
	f.kvIndex = make(map[string]int, n)
	for i := range n {
		kvOff := r.pos
		kb, err := r.strBytes()
		if err != nil {
			return wrap(err, "kv %d: key", i)
		}
		if err := checkKey(kb); err != nil {
			return errAt(kvOff, "kv %d: %v", i, err)
		}
		if err := r.charge(len(kb), 1, func() string { return "a key" }); err != nil {
			return err
		}
		key := string(kb)
		if j, dup := f.kvIndex[key]; dup {
			return errAt(kvOff, "duplicate key %q (kv %d and kv %d)", key, j, i)
		}
		tOff := r.pos
		t, err := r.u32()
		if err != nil {
			return wrap(err, "key %q: value type", key)
		}
		if !ValueType(t).valid() {
			return errAt(tOff, "key %q: unknown value type %d (want 0..12)", key, t)
		}
		v, err := r.value(ValueType(t), 0)
		if err != nil {
			return wrap(err, "key %q", key)
		}
		if key == AlignmentKey {
			if err := checkAlignmentValue(v); err != nil {
				return errAt(kvOff, "%v", err)
			}
			a, _ := v.AsUint()
			f.Alignment = int(a)
		}
		f.kvIndex[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
	}
	return nil
}

// checkKey applies the specification's rules for keys that matter to us: non-empty, at most
// MaxKeyLen bytes, and valid UTF-8 so keys print and compare sanely.
func checkKey(k []byte) error {
	switch {
	case len(k) == 0:
		return errors.New("empty key")
	case len(k) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes exceeds limit %d", len(k), MaxKeyLen)
	case !utf8.Valid(k):
		return fmt.Errorf("key %q is not valid UTF-8", k)
	}
	return nil
}

// checkAlignmentValue checks general.alignment: a uint32 power of two up to MaxAlignment.
func checkAlignmentValue(v Value) error {
	if v.Type() != ValueUint32 {
		return fmt.Errorf("%s has type %s, want uint32", AlignmentKey, v.Type())
	}
	a, _ := v.AsUint()
	if a == 0 || a&(a-1) != 0 {
		return fmt.Errorf("%s = %d is not a power of two", AlignmentKey, a)
	}
	if a > MaxAlignment {
		return fmt.Errorf("%s = %d exceeds limit %d", AlignmentKey, a, MaxAlignment)
	}
	return nil
}

// checkTensorName requires a non-empty name of at most MaxTensorNameLen bytes of valid UTF-8.
func checkTensorName(n []byte) error {
	switch {
	case len(n) == 0:
		return errors.New("empty tensor name")
	case len(n) > MaxTensorNameLen:
		return fmt.Errorf("tensor name %q of %d bytes exceeds limit %d", n, len(n), MaxTensorNameLen)
	case !utf8.Valid(n):
		return fmt.Errorf("tensor name %q is not valid UTF-8", n)
	}
	return nil
}

// tensorSize validates a shape for type t and returns its byte size. Every partial product of
// the non-zero dims fits in an int, so Elements, Rows and Cols cannot overflow; the row length
// Dims[0] must be a whole number of blocks, as ggml requires.
func tensorSize(dims []uint64, t GGMLType) (uint64, error) {
	if len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dims exceeds limit %d", len(dims), MaxDims)
	}
	tt, ok := typeTable[t]
	if !ok {
		return 0, fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	nz := uint64(1) // product of the non-zero dims
	for _, d := range dims {
		if d == 0 {
			continue
		}
		hi, lo := bits.Mul64(nz, d)
		if hi != 0 || lo > math.MaxInt {
			return 0, fmt.Errorf("dims %v: element count overflows (limit %d)", dims, math.MaxInt)
		}
		nz = lo
	}
	cols := uint64(1)
	if len(dims) > 0 {
		cols = dims[0]
	}
	bs := uint64(tt.blockSize)
	if cols%bs != 0 {
		return 0, fmt.Errorf("dims %v: row length %d is not a multiple of the %s block size %d", dims, cols, t, bs)
	}
	rows := uint64(1)
	for _, d := range dims[min(1, len(dims)):] {
		rows *= d // bounded by nz above
	}
	rowBytes, ok := mulInt(cols/bs, uint64(tt.typeSize))
	if ok {
		var size uint64
		if size, ok = mulInt(rowBytes, rows); ok {
			return size, nil
		}
	}
	return 0, fmt.Errorf("dims %v: byte size of %s data overflows (limit %d)", dims, t, math.MaxInt)
}

// mulInt returns a*b and whether it fits in an int.
func mulInt(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0 && lo <= math.MaxInt
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

func (f *File) parseTensorInfos(r *reader, n64 uint64) error {
	// The KVs used some of the bytes that bounded the count in the header: check again.
	if lim := uint64(r.left() / minTensorInfoSize); n64 > lim {
		return errAt(r.pos, "tensor count %d exceeds what the %d bytes left after the metadata can hold (at most %d)", n64, r.left(), lim)
	}
	n := int(n64)
	if err := r.charge(n, tensorCost, func() string { return fmt.Sprintf("%d tensor infos", n) }); err != nil {
		return err
	}
	f.Tensors = make([]TensorInfo, n)
	f.tensorIdx = make(map[string]int, n)
	infoOffs := make([]int, n)
	for i := range f.Tensors {
		infoOffs[i] = r.pos
		nb, err := r.strBytes()
		if err != nil {
			return wrap(err, "tensor info %d: name", i)
		}
		if err := checkTensorName(nb); err != nil {
			return errAt(infoOffs[i], "tensor info %d: %v", i, err)
		}
		name := string(nb)
		if j, dup := f.tensorIdx[name]; dup {
			return errAt(infoOffs[i], "duplicate tensor name %q (tensor %d and tensor %d)", name, j, i)
		}
		ndOff := r.pos
		nd, err := r.u32()
		if err != nil {
			return wrap(err, "tensor %q: n_dims", name)
		}
		if nd > MaxDims {
			return errAt(ndOff, "tensor %q: n_dims %d exceeds limit %d", name, nd, MaxDims)
		}
		if err := r.charge(len(nb)+8*int(nd), 1, func() string { return "a tensor name and dims" }); err != nil {
			return err
		}
		dims := make([]uint64, nd)
		for j := range dims {
			if dims[j], err = r.u64(); err != nil {
				return wrap(err, "tensor %q: dim %d", name, j)
			}
		}
		typOff := r.pos
		typ, err := r.u32()
		if err != nil {
			return wrap(err, "tensor %q: type", name)
		}
		if !GGMLType(typ).Known() {
			return errAt(typOff, "tensor %q: unknown ggml type %d", name, typ)
		}
		off, err := r.u64()
		if err != nil {
			return wrap(err, "tensor %q: offset", name)
		}
		size, err := tensorSize(dims, GGMLType(typ))
		if err != nil {
			return errAt(infoOffs[i], "tensor %q: %v", name, err)
		}
		f.Tensors[i] = TensorInfo{Name: name, Dims: dims, Type: GGMLType(typ), Offset: off, Size: size}
		f.tensorIdx[name] = i
	}

	// The data section starts at the first aligned offset after the infos. A file with no
	// tensor bytes may end before it (nothing is lost), so a missing section is just empty.
	align := uint64(f.Alignment)
	dataStart := alignUp(uint64(r.pos), align)
	dataLen := uint64(0)
	if dataStart <= uint64(len(r.b)) {
		dataLen = uint64(len(r.b)) - dataStart
	}
	f.DataOffset = int(min(dataStart, uint64(len(r.b))))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%align != 0 {
			return errAt(infoOffs[i], "tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, align)
		}
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return errAt(infoOffs[i], "tensor %q: data [%d, %d) of the data section at file offset %d runs past the end of the file (%d bytes, data section %d bytes)",
				t.Name, t.Offset, t.Offset+t.Size, dataStart, len(r.b), dataLen)
		}
	}
	return f.checkOverlap(infoOffs)
}

// checkOverlap refuses tensors whose data ranges share bytes. Aliased tensors are never produced
// by ggml's writer; allowing them would let a crafted file make two weights one. Gaps and any
// order are allowed. Empty tensors overlap nothing.
func (f *File) checkOverlap(infoOffs []int) error {
	idx := make([]int, 0, len(f.Tensors))
	for i := range f.Tensors {
		if f.Tensors[i].Size > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		oa, ob := f.Tensors[a].Offset, f.Tensors[b].Offset
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(idx); k++ {
		p, c := &f.Tensors[idx[k-1]], &f.Tensors[idx[k]]
		if p.Offset+p.Size > c.Offset {
			return errAt(infoOffs[idx[k]], "tensors %q [%d, %d) and %q [%d, %d) overlap in the data section",
				p.Name, p.Offset, p.Offset+p.Size, c.Name, c.Offset, c.Offset+c.Size)
		}
	}
	return nil
}

// Close releases the file mapping of a File from Open; after it, TensorData fails with
// ErrClosed and slices it returned must not be used. Close of a File from Parse only marks it
// closed. Calling Close again returns nil.
func (f *File) Close() error {
	closer := f.closer
	f.closer, f.mapping, f.data = nil, nil, nil
	if closer != nil {
		return closer()
	}
	return nil
}

// Get returns the value stored under key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.Metadata[i].Value, true
}

// GetString returns the string stored under key; false if absent or not a string.
func (f *File) GetString(key string) (string, bool) {
	v, _ := f.Get(key)
	return v.AsString()
}

// GetUint returns the integer stored under key as a uint64, whatever its integer type; false if
// absent, not an integer, or negative.
func (f *File) GetUint(key string) (uint64, bool) {
	v, _ := f.Get(key)
	return v.AsUint()
}

// GetInt returns the integer stored under key as an int64, whatever its integer type; false if
// absent, not an integer, or a uint64 above math.MaxInt64.
func (f *File) GetInt(key string) (int64, bool) {
	v, _ := f.Get(key)
	return v.AsInt()
}

// GetFloat returns the float32 or float64 stored under key as a float64; false if absent or not
// a float.
func (f *File) GetFloat(key string) (float64, bool) {
	v, _ := f.Get(key)
	return v.AsFloat()
}

// GetBool returns the bool stored under key; false as second result if absent or not a bool.
func (f *File) GetBool(key string) (b, ok bool) {
	v, _ := f.Get(key)
	return v.AsBool()
}

// GetArray returns the array stored under key; false if absent or not an array.
func (f *File) GetArray(key string) (*Array, bool) {
	v, _ := f.Get(key)
	return v.AsArray()
}

// Tensor returns the info of the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIdx[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the data of the tensor called name as a sub-slice of the parsed bytes
// (no copy), with capacity equal to its length so appends cannot run into the next tensor.
func (f *File) TensorData(name string) ([]byte, error) {
	if f.data == nil {
		return nil, ErrClosed
	}
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	start := f.DataOffset + int(t.Offset)
	end := start + int(t.Size)
	return f.data[start:end:end], nil
}

// CheckAligned reports an error if the data of tensor t does not start at a memory address that
// is a multiple of align bytes. Viewing bytes as typed blocks or floats with unsafe.Slice needs
// this: Q8_0/Q5_0 blocks need 2, float32 needs 4. Files with general.alignment 1 or 2 can place
// tensors at any address; a mapping is page-aligned, so the usual alignment 32 always passes.
// Empty tensors have no address and always pass.
func (f *File) CheckAligned(t *TensorInfo, align int) error {
	if align <= 0 || align&(align-1) != 0 {
		return fmt.Errorf("gguf: CheckAligned: align %d is not a positive power of two", align)
	}
	b, err := f.TensorData(t.Name)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	if addr := addrOf(b); addr%uintptr(align) != 0 {
		return fmt.Errorf("gguf: tensor %q: data at address %#x (file offset %d) is not %d-byte aligned",
			t.Name, addr, f.DataOffset+int(t.Offset), align)
	}
	return nil
}

// addrOf is the address of b's first byte.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
