package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Builder assembles a GGUF file: metadata KVs, tensor infos and tensor data, written in one pass
// by WriteTo. Tensor data is streamed, never copied: AddTensor keeps a reference to the caller's
// bytes and AddTensorFunc asks for them only while writing, so a file of any size can be written
// with no second copy in memory. Every input is checked against the same rules Parse applies,
// so whatever a Builder writes, Parse accepts.
type Builder struct {
	version   uint32
	kvs       []KV
	kvIndex   map[string]int
	tensors   []pendingTensor
	tensorIdx map[string]int
}

type pendingTensor struct {
	info  TensorInfo
	data  []byte
	write func(io.Writer) error
}

// NewBuilder returns an empty Builder for a version 3 file with the default alignment (32).
func NewBuilder() *Builder {
	return &Builder{version: 3, kvIndex: map[string]int{}, tensorIdx: map[string]int{}}
}

// SetVersion chooses the file version, 2 or 3 (identical encodings for little-endian files;
// version 3 only added big-endian support).
func (b *Builder) SetVersion(v uint32) error {
	if v != 2 && v != 3 {
		return fmt.Errorf("gguf: Builder: version %d not supported, want 2 or 3", v)
	}
	b.version = v
	return nil
}

// SetAlignment sets the data alignment, a power of two from 1 to MaxAlignment, by setting (or
// replacing) the general.alignment KV.
func (b *Builder) SetAlignment(a int) error {
	if a <= 0 || a > MaxAlignment {
		return fmt.Errorf("gguf: Builder: alignment %d out of range 1..%d", a, MaxAlignment)
	}
	v := Uint32(uint32(a))
	if err := checkAlignmentValue(v); err != nil {
		return fmt.Errorf("gguf: Builder: %v", err)
	}
	if i, ok := b.kvIndex[AlignmentKey]; ok {
		b.kvs[i].Value = v
		return nil
	}
	return b.AddKV(AlignmentKey, v)
}

// Alignment is the data alignment the file will have.
func (b *Builder) Alignment() int {
	if i, ok := b.kvIndex[AlignmentKey]; ok {
		a, _ := b.kvs[i].Value.AsUint()
		return int(a)
	}
	return DefaultAlignment
}

// AddKV appends a metadata entry. Keys must be unique, non-empty, valid UTF-8 and at most
// MaxKeyLen bytes; arrays may nest at most MaxArrayDepth deep; general.alignment must be a uint32
// power of two up to MaxAlignment. Arrays are referenced, not copied, until WriteTo.
func (b *Builder) AddKV(key string, v Value) error {
	if err := checkKey([]byte(key)); err != nil {
		return fmt.Errorf("gguf: Builder: %v", err)
	}
	if _, dup := b.kvIndex[key]; dup {
		return fmt.Errorf("gguf: Builder: duplicate key %q", key)
	}
	if err := checkValue(v, 0); err != nil {
		return fmt.Errorf("gguf: Builder: key %q: %v", key, err)
	}
	if key == AlignmentKey {
		if err := checkAlignmentValue(v); err != nil {
			return fmt.Errorf("gguf: Builder: %v", err)
		}
	}
	b.kvIndex[key] = len(b.kvs)
	b.kvs = append(b.kvs, KV{Key: key, Value: v})
	return nil
}

// checkValue refuses invalid Values and arrays not made by NewArray or nested too deeply;
// depth is the number of enclosing arrays.
func checkValue(v Value, depth int) error {
	if !v.set || !v.typ.valid() {
		return errors.New("invalid (zero) Value")
	}
	if v.typ != ValueArray {
		return nil
	}
	if depth+1 > MaxArrayDepth {
		return fmt.Errorf("arrays nested %d deep, limit %d", depth+1, MaxArrayDepth)
	}
	if v.arr == nil || v.arr.data == nil {
		return errors.New("array not made by NewArray")
	}
	if sub, ok := v.arr.Arrays(); ok {
		for i, a := range sub {
			if a == nil {
				return fmt.Errorf("array element %d is nil", i)
			}
			if err := checkValue(ArrayValue(a), depth+1); err != nil {
				return fmt.Errorf("array element %d: %v", i, err)
			}
		}
	}
	return nil
}

// AddTensor appends a tensor whose data is in data, which must hold exactly the tensor's byte
// size and stay unmodified until WriteTo returns. dims are in ggml order (Dims[0] is the row
// length, a multiple of typ's block size).
func (b *Builder) AddTensor(name string, typ GGMLType, dims []uint64, data []byte) error {
	info, err := b.newInfo(name, typ, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != info.Size {
		return fmt.Errorf("gguf: Builder: tensor %q: data has %d bytes, %s dims %v need %d", name, len(data), typ, dims, info.Size)
	}
	b.add(pendingTensor{info: info, data: data})
	return nil
}

// AddTensorFunc appends a tensor whose data write produces while WriteTo runs: it must write
// exactly the tensor's byte size to w, which refuses more. This streams tensors that are made
// on the fly (synthetic models) without holding them in memory.
func (b *Builder) AddTensorFunc(name string, typ GGMLType, dims []uint64, write func(w io.Writer) error) error {
	if write == nil {
		return fmt.Errorf("gguf: Builder: tensor %q: nil write func", name)
	}
	info, err := b.newInfo(name, typ, dims)
	if err != nil {
		return err
	}
	b.add(pendingTensor{info: info, write: write})
	return nil
}

func (b *Builder) newInfo(name string, typ GGMLType, dims []uint64) (TensorInfo, error) {
	if err := checkTensorName([]byte(name)); err != nil {
		return TensorInfo{}, fmt.Errorf("gguf: Builder: %v", err)
	}
	if _, dup := b.tensorIdx[name]; dup {
		return TensorInfo{}, fmt.Errorf("gguf: Builder: duplicate tensor name %q", name)
	}
	size, err := tensorSize(dims, typ)
	if err != nil {
		return TensorInfo{}, fmt.Errorf("gguf: Builder: tensor %q: %v", name, err)
	}
	return TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size}, nil
}

func (b *Builder) add(p pendingTensor) {
	b.tensorIdx[p.info.Name] = len(b.tensors)
	b.tensors = append(b.tensors, p)
}

// Layout returns the tensor infos as they will be written (with their data offsets) and the
// total file size. Tensors are laid out in the order added, each starting at the next aligned
// offset, as ggml does.
func (b *Builder) Layout() ([]TensorInfo, int64) {
	infos, dataStart, dataLen := b.layout()
	return infos, int64(dataStart + dataLen)
}

func (b *Builder) layout() (infos []TensorInfo, dataStart, dataLen uint64) {
	align := uint64(b.Alignment())
	infos = make([]TensorInfo, len(b.tensors))
	off := uint64(0)
	for i, p := range b.tensors {
		infos[i] = p.info
		infos[i].Offset = off
		off = alignUp(off+p.info.Size, align)
	}
	return infos, alignUp(uint64(b.headerLen()), align), off
}

// headerLen is the encoded size of header, KVs and tensor infos.
func (b *Builder) headerLen() int {
	n := headerSize
	for _, kv := range b.kvs {
		n += 8 + len(kv.Key) + 4 + valueLen(kv.Value)
	}
	for _, p := range b.tensors {
		n += 8 + len(p.info.Name) + 4 + 8*len(p.info.Dims) + 4 + 8
	}
	return n
}

// valueLen is the encoded size of v without its type tag.
func valueLen(v Value) int {
	switch v.typ {
	case ValueString:
		return 8 + len(v.str)
	case ValueArray:
		n := 4 + 8
		if s, ok := v.arr.Strings(); ok {
			for _, e := range s {
				n += 8 + len(e)
			}
		} else if s, ok := v.arr.Arrays(); ok {
			for _, e := range s {
				n += valueLen(ArrayValue(e))
			}
		} else {
			n += v.arr.Len() * v.arr.elem.fixedSize()
		}
		return n
	}
	return v.typ.fixedSize()
}

// WriteTo writes the file to w: header, KVs, tensor infos, padding, then each tensor's data
// padded to the alignment. It returns the bytes written.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	infos, dataStart, _ := b.layout()
	hdr := make([]byte, 0, dataStart)
	hdr = append(hdr, "GGUF"...)
	hdr = binary.LittleEndian.AppendUint32(hdr, b.version)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(b.tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(b.kvs)))
	for _, kv := range b.kvs {
		hdr = appendString(hdr, kv.Key)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(kv.Value.typ))
		hdr = appendValue(hdr, kv.Value)
	}
	for _, t := range infos {
		hdr = appendString(hdr, t.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			hdr = binary.LittleEndian.AppendUint64(hdr, d)
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(t.Type))
		hdr = binary.LittleEndian.AppendUint64(hdr, t.Offset)
	}
	hdr = append(hdr, make([]byte, int(dataStart)-len(hdr))...)
	// Buffer below the tensor writers so that write funcs may write in small pieces; count
	// below the buffer so the result is what reached w.
	cnt := &countWriter{w: w}
	cw := bufio.NewWriterSize(cnt, 1<<16)
	if _, err := cw.Write(hdr); err != nil {
		return cnt.n, err
	}
	align := uint64(b.Alignment())
	for i, p := range b.tensors {
		if p.write != nil {
			lw := &limitWriter{w: cw, left: p.info.Size}
			if err := p.write(lw); err != nil {
				return cnt.n, fmt.Errorf("gguf: tensor %q: %w", p.info.Name, err)
			}
			if lw.left != 0 {
				return cnt.n, fmt.Errorf("gguf: tensor %q: write func wrote %d bytes, want %d", p.info.Name, p.info.Size-lw.left, p.info.Size)
			}
		} else if _, err := cw.Write(p.data); err != nil {
			return cnt.n, err
		}
		end := infos[i].Offset + p.info.Size
		if err := writeZeros(cw, alignUp(end, align)-end); err != nil {
			return cnt.n, err
		}
	}
	err := cw.Flush()
	return cnt.n, err
}

var zeros [4096]byte

func writeZeros(w io.Writer, n uint64) error {
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// countWriter counts bytes written for WriteTo's result.
type countWriter struct {
	w io.Writer
	n int64
}

// Write passes p on and counts what was written.
func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// limitWriter passes at most left bytes and fails past that, so a write func cannot corrupt the
// layout by writing too much.
type limitWriter struct {
	w    io.Writer
	left uint64
}

// Write passes p on if it fits in what is left of the tensor.
func (l *limitWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > l.left {
		return 0, fmt.Errorf("write of %d bytes exceeds the %d bytes left of the tensor", len(p), l.left)
	}
	n, err := l.w.Write(p)
	l.left -= uint64(n)
	return n, err
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v without its type tag.
func appendValue(b []byte, v Value) []byte {
	switch v.typ {
	case ValueString:
		return appendString(b, v.str)
	case ValueArray:
		return appendArray(b, v.arr)
	}
	switch v.typ.fixedSize() {
	case 1:
		return append(b, byte(v.bits))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(v.bits))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(v.bits))
	}
	return binary.LittleEndian.AppendUint64(b, v.bits)
}

func appendArray(b []byte, a *Array) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(a.elem))
	b = binary.LittleEndian.AppendUint64(b, uint64(a.Len()))
	le := binary.LittleEndian
	switch d := a.data.(type) {
	case []uint8:
		return append(b, d...)
	case []int8:
		for _, x := range d {
			b = append(b, byte(x))
		}
	case []bool:
		for _, x := range d {
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []uint16:
		for _, x := range d {
			b = le.AppendUint16(b, x)
		}
	case []int16:
		for _, x := range d {
			b = le.AppendUint16(b, uint16(x))
		}
	case []uint32:
		for _, x := range d {
			b = le.AppendUint32(b, x)
		}
	case []int32:
		for _, x := range d {
			b = le.AppendUint32(b, uint32(x))
		}
	case []float32:
		for _, x := range d {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	case []uint64:
		for _, x := range d {
			b = le.AppendUint64(b, x)
		}
	case []int64:
		for _, x := range d {
			b = le.AppendUint64(b, uint64(x))
		}
	case []float64:
		for _, x := range d {
			b = le.AppendUint64(b, math.Float64bits(x))
		}
	case []string:
		for _, x := range d {
			b = appendString(b, x)
		}
	case []*Array:
		for _, x := range d {
			b = appendArray(b, x)
		}
	}
	return b
}
