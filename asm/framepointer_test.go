//go:build amd64 && !purego

package asm

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/trace"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

var (
	reTextLine = regexp.MustCompile(`^TEXT ·(\w+)\(SB\), (?:[A-Z|]+, )?\$(\d+)-\d+`)
	reBPWrite  = regexp.MustCompile(`\b(rbp|ebp|bp|bpl)\b|\bBP\b`)
)

// TestFramePointer checks c2goasm problem 3 statically: every generated function that
// touches BP (its constant table's LEAQ, or C code using rbp) has a non-zero frame, so the Go
// assembler saves and restores BP around it. go vet's framepointer check sees only the LEAQ,
// not the rbp uses inside the encoded instructions; this test reads their comments too.
func TestFramePointer(t *testing.T) {
	files, err := filepath.Glob("*_amd64.s")
	if err != nil || len(files) == 0 {
		t.Fatalf("no assembly files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, frame := "", ""
		for _, l := range strings.Split(string(b), "\n") {
			if m := reTextLine.FindStringSubmatch(l); m != nil {
				name, frame = m[1], m[2]
				continue
			}
			if name == "" || frame != "0" {
				continue
			}
			if reBPWrite.MatchString(l) {
				t.Errorf("%s: %s has a $0 frame but uses BP: %s", f, name, strings.TrimSpace(l))
				name = ""
			}
		}
	}
}

// TestTraceDirectCalls calls generated functions directly (ABI0, no wrapper: the wrapper
// that func values go through would restore BP and hide a clobbered one) and makes the
// tracer unwind the caller's frame right after each call. With BP clobbered, the tracer's
// frame-pointer unwinder crashes (checked: a $0 frame for _krt_swiglu_avx512 segfaults
// here in runtime.fpTracebackPCs).
func TestTraceDirectCalls(t *testing.T) {
	if !trace.IsEnabled() {
		var buf bytes.Buffer
		if err := trace.Start(&buf); err != nil {
			t.Fatal(err)
		}
		defer trace.Stop()
	}
	const n = 256
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range x {
		x[i] = float32(i%13) - 6
	}
	q := make([]byte, n/qk*q8Size)
	q5b := make([]byte, n/qk*q5Size)
	eps := float32(1e-6)
	if !cpu.Supports(cpu.AVX2) {
		t.Skip("needs AVX2")
	}
	for i := 0; i < 20; i++ {
		_krt_swiglu_ref(p(y), p(x), p(x), 0, n)
		runtime.Gosched()
		_krt_swiglu_avx2(p(y), p(x), p(x), 0, n)
		runtime.Gosched()
		_krt_quantize_q8_0_ref(p(q), p(x), 0, n/qk)
		runtime.Gosched()
		_krt_quantize_q8_0_avx2(p(q), p(x), 0, n/qk)
		runtime.Gosched()
		_krt_quantize_q5_0_avx2(p(q5b), p(x), 0, n/qk)
		runtime.Gosched()
		_krt_rmsnorm_ref(p(y), p(x), p(x), p([]float32{eps}), n, 0, 1)
		runtime.Gosched()
		_krt_softmax_avx2(p(y), nil, n, 0, 1)
		runtime.Gosched()
		_krt_add_avx2(p(y), p(x), p(x), 0, n)
		runtime.Gosched()
		if cpu.Supports(cpu.AVX512) {
			_krt_swiglu_avx512(p(y), p(x), p(x), 0, n)
			runtime.Gosched()
			_krt_quantize_q8_0_avx512(p(q), p(x), 0, n/qk)
			runtime.Gosched()
			_krt_quantize_q5_0_avx512(p(q5b), p(x), 0, n/qk)
			runtime.Gosched()
			_krt_dequantize_q5_0_avx512(p(y), p(q5b), 0, n/qk)
			runtime.Gosched()
			_krt_softmax_avx512(p(y), nil, n, 0, 1)
			runtime.Gosched()
		}
	}
}
