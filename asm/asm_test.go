//go:build amd64 && !purego

package asm

import (
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// TestComplete checks that asmgen found every kernel: the lead wants complete sets.
func TestComplete(t *testing.T) {
	if len(missing) > 0 {
		t.Errorf("asm backend lacks %v: the C kernels were placeholders when asmgen ran; run `make asm`", missing)
	}
	for _, s := range sets {
		if m := s.Missing(); len(m) > 0 {
			t.Errorf("%s lacks %v", s.Name(), m)
		}
	}
	for _, v := range []cpu.Variant{cpu.Ref, cpu.AVX2, cpu.AVX512} {
		if s, err := kern.Lookup("asm", v); err != nil || s != sets[v] {
			t.Errorf("kern.Lookup(asm, %s) = %v, %v", v, s, err)
		}
	}
}

// TestNoAllocs: calling through a kern.Set entry, including RMSNorm's thunk that passes the
// address of its Args' eps, allocates nothing (the prototypes are go:noescape and Args is
// passed by value).
func TestNoAllocs(t *testing.T) {
	x := make([]float32, 896)
	w := make([]float32, 896)
	y := make([]float32, 896)
	for i := range x {
		x[i], w[i] = float32(i%7)-3, 1
	}
	for _, v := range cpu.Supported() {
		s := sets[v]
		var rms, add kern.Args // the C parameter order of krt_rmsnorm and krt_add
		rms.P[0], rms.P[1], rms.P[2], rms.F[0], rms.I[0] = p(y), p(x), p(w), 1e-6, len(x)
		add.P[0], add.P[1], add.P[2] = p(y), p(x), p(w)
		if n := testing.AllocsPerRun(100, func() { s.K[kern.RMSNorm](rms, nil, 0, 1) }); n != 0 {
			t.Errorf("%s RMSNorm: %v allocs per call", s.Name(), n)
		}
		if n := testing.AllocsPerRun(100, func() { s.K[kern.Add](add, nil, 0, len(x)) }); n != 0 {
			t.Errorf("%s Add: %v allocs per call", s.Name(), n)
		}
	}
}

const (
	q8Size = 34 // bytes of a krt_block_q8_0
	q5Size = 22 // bytes of a krt_block_q5_0
	qk     = 32
)

func p[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}
