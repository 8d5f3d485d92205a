package orchestrator

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
)

// Binding a GGUF file's tensors to a model.
//
// Memory: quantized matrices (Q8_0, Q5_0, Q4_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS) and F32 ones are used in place, as typed views of the file's read-only mapping:
// loading reads no weight bytes and copies none; pages come from the page cache on first touch.
// Only small tensors are copied into the model's arena (norms, the q|k|v biases, which the
// decoder wants concatenated), plus the matrices held in another form than the file's: F16 and
// BF16 ones are converted once to float32 (at twice the file's bytes), Q4_1 ones to Q5_1 (1.2x),
// and any tensor whose data is not aligned for its type (possible only with
// general.alignment < 4).

// fileSource is a GGUF file as a weight source; infos holds the checked tensors by name.
type fileSource struct {
	f     *gguf.File
	infos map[string]*gguf.TensorInfo
	// mapWeights views the usable matrices in the file mapping instead of copying them
	// (LoadOptions.MapWeights).
	mapWeights bool
}

// copied reports whether the matrix t goes into the arena and the arena buffer it needs:
// always unless s.mapWeights, and then still when it is held in another form (F16, BF16 and
// Q4_1 are converted) or misaligned for its type (it cannot be viewed in place).
func (s *fileSource) copied(t *gguf.TensorInfo, qt QType, data []byte) (copy bool, elem, count int) {
	switch qt {
	case F32:
		return !s.mapWeights || addrOf(data)%4 != 0, 4, t.Elements()
	case F16, BF16:
		return true, 4, t.Elements() // converted to float32
	case Q4_1:
		return true, qt.blockBytes(), t.Elements() / qt.blockLen() // converted to Q5_1
	}
	// Every block type holds uint16 scales at even offsets and no wider field.
	return !s.mapWeights || addrOf(data)%2 != 0, qt.blockBytes(), t.Elements() / qt.blockLen()
}

func (s *fileSource) plan(p *arena.Plan, specs []tensorSpec) error {
	for _, sp := range specs {
		if sp.kind != kindMatrix {
			continue
		}
		t := s.infos[sp.name]
		data, err := s.f.TensorData(sp.name)
		if err != nil {
			return fmt.Errorf("orchestrator: tensor %q: %w", sp.name, err)
		}
		if cp, elem, count := s.copied(t, sp.typ, data); cp {
			p.Add(arena.Buffer{Name: "w." + sp.name, ElemSize: elem, Count: count, Region: arena.Weights})
		}
	}
	return nil
}

// blocks returns n values of T holding the tensor's bytes: a view of the file, or its arena
// buffer plan with the bytes copied in.
func blocks[T any](s *fileSource, t *gguf.TensorInfo, data []byte, n int, cp bool, a *arena.Arena, l *arena.Layout, plan string) ([]T, error) {
	if !cp {
		return fileView[T](s.f, t, data, n)
	}
	v, err := arena.Get[T](a, l, plan)
	if err == nil {
		copy(bytesOf(v), data)
	}
	return v, err
}

// matrix makes the Matrix of sp: a view of the file, or its arena copy filled now.
func (s *fileSource) matrix(sp tensorSpec, a *arena.Arena, l *arena.Layout) (*Matrix, error) {
	t := s.infos[sp.name]
	data, err := s.f.TensorData(sp.name)
	if err != nil {
		return nil, err
	}
	cp, _, _ := s.copied(t, sp.typ, data)
	mat := &Matrix{Name: sp.name, Type: sp.typ, Rows: t.Rows(), Cols: t.Cols(), Mapped: !cp && s.f.Mapping() != nil}
	nb := t.Elements() / sp.typ.blockLen()
	plan := "w." + sp.name
	switch sp.typ {
	case Q8_0:
		mat.Q8, err = blocks[kernelrt.BlockQ8_0](s, t, data, nb, cp, a, l, plan)
	case Q5_0:
		mat.Q5, err = blocks[kernelrt.BlockQ5_0](s, t, data, nb, cp, a, l, plan)
	case Q4_0:
		mat.Q4, err = blocks[kernelrt.BlockQ4_0](s, t, data, nb, cp, a, l, plan)
	case IQ4_NL:
		mat.IQ4NL, err = blocks[kernelrt.BlockIQ4_NL](s, t, data, nb, cp, a, l, plan)
	case Q5_1:
		mat.Q51, err = blocks[kernelrt.BlockQ5_1](s, t, data, nb, cp, a, l, plan)
	case Q4_K:
		mat.Q4K, err = blocks[kernelrt.BlockQ4K](s, t, data, nb, cp, a, l, plan)
	case Q5_K:
		mat.Q5K, err = blocks[kernelrt.BlockQ5K](s, t, data, nb, cp, a, l, plan)
	case Q6_K:
		mat.Q6K, err = blocks[kernelrt.BlockQ6K](s, t, data, nb, cp, a, l, plan)
	case Q2_K:
		mat.Q2K, err = blocks[kernelrt.BlockQ2K](s, t, data, nb, cp, a, l, plan)
	case Q4_1:
		if mat.Q51, err = arena.Get[kernelrt.BlockQ5_1](a, l, plan); err == nil {
			q4_1ToQ5_1(mat.Q51, data)
		}
	case Q3_K:
		mat.Q3K, err = blocks[kernelrt.BlockQ3K](s, t, data, nb, cp, a, l, plan)
	case IQ4_XS:
		mat.IQ4XS, err = blocks[kernelrt.BlockIQ4_XS](s, t, data, nb, cp, a, l, plan)
	case F32, F16, BF16:
		if cp {
			if mat.F32, err = arena.Get[float32](a, l, plan); err == nil {
				decodeFloats(mat.F32, data, t.Type)
			}
		} else {
			mat.F32, err = fileView[float32](s.f, t, data, t.Elements())
		}
	default:
		err = fmt.Errorf("no binding for type %s", sp.typ)
	}
	return mat, err
}

// q4_1ToQ5_1 converts Q4_1 blocks (fp16 d, fp16 m, 16 bytes of nibbles: 20 bytes) to Q5_1
// blocks with the same d, m and nibbles and a zero fifth bit: value = d*q + m unchanged.
func q4_1ToQ5_1(dst []kernelrt.BlockQ5_1, src []byte) {
	for i := range dst {
		b := src[20*i : 20*i+20]
		dst[i] = kernelrt.BlockQ5_1{D: uint16(b[0]) | uint16(b[1])<<8, M: uint16(b[2]) | uint16(b[3])<<8}
		copy(dst[i].Qs[:], b[4:20])
	}
}

// vectors copies F32 or F16 vector tensors as float32, one after the other (the q|k|v biases).
func (s *fileSource) vectors(dst []float32, names ...string) error {
	for _, n := range names {
		t := s.infos[n]
		data, err := s.f.TensorData(n)
		if err != nil {
			return err
		}
		k := t.Elements()
		decodeFloats(dst[:k], data, t.Type)
		dst = dst[k:]
	}
	return nil
}

// recipe describes a loaded model's weight types, as the file stores them (a Q4_1 matrix is
// held as Q5_1 but reported as the file's type).
func (s *fileSource) recipe(m *Model) Recipe {
	ft := func(mt *Matrix) QType {
		if t, ok := s.infos[mt.Name]; ok {
			if q, ok := qtypeOf(t.Type); ok {
				return q
			}
		}
		return mt.Type
	}
	l := &m.Layers[0]
	r := Recipe{Q: ft(l.Q), K: ft(l.K), V: ft(l.V), O: ft(l.O), Gate: ft(l.Gate), Up: ft(l.Up), Down: ft(l.Down), Embedded: ft(m.Embed),
		Untied: m.Output != m.Embed, Output: ft(m.Output)}
	count := map[QType]int{}
	for i := range m.Layers {
		ly := &m.Layers[i]
		for _, mt := range []*Matrix{ly.Q, ly.K, ly.V, ly.O, ly.Gate, ly.Up, ly.Down} {
			count[ft(mt)]++
		}
	}
	// A file that stores exactly a built-in recipe takes its name (the benchmark suite compares
	// those with llama.cpp's numbers).
	tiedAs := func(want Recipe) bool {
		if m.Output != m.Embed || ft(m.Embed) != want.Embedded {
			return false
		}
		for i := range m.Layers {
			ly := &m.Layers[i]
			if ft(ly.Q) != want.Q || ft(ly.K) != want.K || ft(ly.V) != want.V || ft(ly.O) != want.O ||
				ft(ly.Gate) != want.Gate || ft(ly.Up) != want.Up || ft(ly.Down) != want.Down {
				return false
			}
		}
		return true
	}
	for _, want := range []Recipe{RecipeQ8_0(), RecipeMixed(), RecipeF16()} {
		if tiedAs(want) {
			return want
		}
	}
	var parts []string
	for t := range numQTypes {
		if count[t] > 0 {
			parts = append(parts, fmt.Sprintf("%sx%d", t, count[t]))
		}
	}
	r.Name = "gguf " + strings.Join(parts, "+") + ", embd " + ft(m.Embed).String()
	if m.Output != m.Embed {
		r.Name += ", output " + ft(m.Output).String()
	} else {
		r.Name += " (tied)"
	}
	return r
}

// fileView views a tensor's data as n values of T in place: through the file mapping when f
// has one (gguf.Open), else over the parsed bytes. The caller has checked the alignment.
func fileView[T any](f *gguf.File, t *gguf.TensorInfo, data []byte, n int) ([]T, error) {
	if fm := f.Mapping(); fm != nil {
		return arena.FileView[T](fm, f.DataOffset+int(t.Offset), n)
	}
	var z T
	if len(data) != n*int(unsafe.Sizeof(z)) {
		return nil, fmt.Errorf("%d bytes do not hold %d values of %d bytes", len(data), n, unsafe.Sizeof(z))
	}
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data))), n), nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// decodeFloats writes the F32, F16 or BF16 little-endian values of src into dst (len(dst)
// values).
func decodeFloats(dst []float32, src []byte, t gguf.GGMLType) {
	switch t {
	case gguf.TypeF16:
		tab := fp16Table()
		for i := range dst {
			dst[i] = tab[uint16(src[2*i])|uint16(src[2*i+1])<<8]
		}
		return
	case gguf.TypeBF16: // the top half of a float32
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
		}
		return
	}
	for i := range dst {
		b := src[4*i : 4*i+4]
		dst[i] = math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	}
}

var (
	fp16Once sync.Once
	fp16Tab  *[1 << 16]float32
)

// fp16Table is every fp16 value as float32 (256 KiB, made once).
func fp16Table() *[1 << 16]float32 {
	fp16Once.Do(func() {
		t := new([1 << 16]float32)
		for i := range t {
			t[i] = kernelrt.FP16ToFP32(uint16(i))
		}
		fp16Tab = t
	})
	return fp16Tab
}
