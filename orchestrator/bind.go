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
// Memory: Q8_0 and Q5_0 matrices (and F32 ones) are used in place, as typed views of the
// file's read-only mapping: loading reads no weight bytes and copies none; pages come from the
// page cache on first touch. Only small tensors are copied into the model's arena (norms, the
// q|k|v biases, which the decoder wants concatenated), plus F16 matrices, which are converted
// once to float32 (the one case where weights are copied, at twice the file's bytes), and any
// tensor whose data is not aligned for its type (possible only with general.alignment < 4).

// fileSource is a GGUF file as a weight source; infos holds the checked tensors by name.
type fileSource struct {
	f     *gguf.File
	infos map[string]*gguf.TensorInfo
}

// copied reports whether the matrix t must be copied into the arena (F16 is converted; a
// misaligned tensor cannot be viewed in place) and the arena buffer it needs.
func copied(t *gguf.TensorInfo, qt QType, data []byte) (copy bool, elem, count int) {
	switch qt {
	case Q8_0, Q5_0:
		return addrOf(data)%2 != 0, qt.blockBytes(), t.Elements() / kernelrt.QK
	case F32:
		return addrOf(data)%4 != 0, 4, t.Elements()
	}
	return true, 4, t.Elements() // F16: converted to float32
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
		if cp, elem, count := copied(t, sp.typ, data); cp {
			p.Add(arena.Buffer{Name: "w." + sp.name, ElemSize: elem, Count: count, Region: arena.Weights})
		}
	}
	return nil
}

// matrix makes the Matrix of sp: a view of the file, or its arena copy filled now.
func (s *fileSource) matrix(sp tensorSpec, a *arena.Arena, l *arena.Layout) (*Matrix, error) {
	t := s.infos[sp.name]
	data, err := s.f.TensorData(sp.name)
	if err != nil {
		return nil, err
	}
	mat := &Matrix{Name: sp.name, Type: sp.typ, Rows: t.Rows(), Cols: t.Cols()}
	n := t.Elements()
	cp, _, _ := copied(t, sp.typ, data)
	plan := "w." + sp.name
	switch sp.typ {
	case Q8_0:
		if cp {
			if mat.Q8, err = arena.Get[kernelrt.BlockQ8_0](a, l, plan); err == nil {
				copy(bytesOf(mat.Q8), data)
			}
		} else {
			mat.Q8, err = fileView[kernelrt.BlockQ8_0](s.f, t, data, n/kernelrt.QK)
		}
	case Q5_0:
		if cp {
			if mat.Q5, err = arena.Get[kernelrt.BlockQ5_0](a, l, plan); err == nil {
				copy(bytesOf(mat.Q5), data)
			}
		} else {
			mat.Q5, err = fileView[kernelrt.BlockQ5_0](s.f, t, data, n/kernelrt.QK)
		}
	case F32, F16:
		if cp {
			if mat.F32, err = arena.Get[float32](a, l, plan); err == nil {
				decodeFloats(mat.F32, data, t.Type)
			}
		} else {
			mat.F32, err = fileView[float32](s.f, t, data, n)
		}
	}
	return mat, err
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

// recipe describes a loaded model's weight types.
func (s *fileSource) recipe(m *Model) Recipe {
	l := &m.Layers[0]
	r := Recipe{Q: l.Q.Type, K: l.K.Type, V: l.V.Type, O: l.O.Type, Gate: l.Gate.Type, Up: l.Up.Type, Down: l.Down.Type, Embedded: m.Embed.Type}
	count := map[QType]int{}
	for i := range m.Layers {
		ly := &m.Layers[i]
		for _, mt := range []*Matrix{ly.Q, ly.K, ly.V, ly.O, ly.Gate, ly.Up, ly.Down} {
			count[mt.Type]++
		}
	}
	// A file that stores exactly a built-in recipe takes its name (the benchmark suite compares
	// those with llama.cpp's numbers).
	tiedAs := func(want Recipe) bool {
		if m.Output != m.Embed || m.Embed.Type != want.Embedded {
			return false
		}
		for i := range m.Layers {
			ly := &m.Layers[i]
			if ly.Q.Type != want.Q || ly.K.Type != want.K || ly.V.Type != want.V || ly.O.Type != want.O ||
				ly.Gate.Type != want.Gate || ly.Up.Type != want.Up || ly.Down.Type != want.Down {
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
	for _, t := range []QType{Q8_0, Q5_0, F16, F32} {
		if count[t] > 0 {
			parts = append(parts, fmt.Sprintf("%sx%d", t, count[t]))
		}
	}
	r.Name = "gguf " + strings.Join(parts, "+") + ", embd " + m.Embed.Type.String()
	if m.Output != m.Embed {
		r.Name += ", output " + m.Output.Type.String()
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

// decodeFloats writes the F32 or F16 little-endian values of src into dst (len(dst) values).
func decodeFloats(dst []float32, src []byte, t gguf.GGMLType) {
	if t == gguf.TypeF16 {
		tab := fp16Table()
		for i := range dst {
			dst[i] = tab[uint16(src[2*i])|uint16(src[2*i+1])<<8]
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
