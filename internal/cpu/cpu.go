// Package cpu reads the CPU features kernelrt cares about once, at start-up, and picks the
// kernel variant. Tests switch features off with Force/Disable so that every variant runs
// on a machine that supports the best one.
package cpu

import (
	"fmt"
	"sync/atomic"

	"github.com/klauspost/cpuid/v2"
)

// Variant names one compiled flavour of every kernel (C suffixes _ref, _avx2, _avx512).
type Variant int32

const (
	// Ref is the portable scalar variant (C _ref, pure Go generic).
	Ref Variant = iota
	// AVX2 needs AVX2, FMA and F16C.
	AVX2
	// AVX512 needs AVX-512 F/BW/VL/DQ and AVX512-VNNI.
	AVX512
)

// String returns the suffix used in C and in reports.
func (v Variant) String() string {
	switch v {
	case Ref:
		return "ref"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return fmt.Sprintf("variant(%d)", int32(v))
}

// ParseVariant maps "ref", "avx2", "avx512" to a Variant.
func ParseVariant(s string) (Variant, error) {
	for _, v := range []Variant{Ref, AVX2, AVX512} {
		if v.String() == s {
			return v, nil
		}
	}
	return Ref, fmt.Errorf("cpu: unknown variant %q (want ref, avx2 or avx512)", s)
}

// Features is what the kernels need to know about the CPU.
type Features struct {
	AVX2, FMA, F16C                       bool
	AVX512F, AVX512BW, AVX512VL, AVX512DQ bool
	AVX512VNNI                            bool
}

// detected is read once from cpuid; hardware never changes under a running process.
var detected = Features{
	AVX2:       cpuid.CPU.Supports(cpuid.AVX2),
	FMA:        cpuid.CPU.Supports(cpuid.FMA3),
	F16C:       cpuid.CPU.Supports(cpuid.F16C),
	AVX512F:    cpuid.CPU.Supports(cpuid.AVX512F),
	AVX512BW:   cpuid.CPU.Supports(cpuid.AVX512BW),
	AVX512VL:   cpuid.CPU.Supports(cpuid.AVX512VL),
	AVX512DQ:   cpuid.CPU.Supports(cpuid.AVX512DQ),
	AVX512VNNI: cpuid.CPU.Supports(cpuid.AVX512VNNI),
}

// Detected returns the features of this CPU as cpuid reported them.
func Detected() Features { return detected }

// Supports reports whether this CPU can run variant v.
func Supports(v Variant) bool {
	f := detected
	switch v {
	case Ref:
		return true
	case AVX2:
		return f.AVX2 && f.FMA && f.F16C
	case AVX512:
		return f.AVX2 && f.FMA && f.F16C && f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512DQ && f.AVX512VNNI
	}
	return false
}

// Best returns the fastest variant this CPU supports.
func Best() Variant {
	for _, v := range []Variant{AVX512, AVX2} {
		if Supports(v) {
			return v
		}
	}
	return Ref
}

// Supported lists every variant this CPU can run, slowest first.
func Supported() []Variant {
	out := []Variant{Ref}
	for _, v := range []Variant{AVX2, AVX512} {
		if Supports(v) {
			out = append(out, v)
		}
	}
	return out
}

// forced holds the variant a test or an option selected; -1 means "use Best".
var forced atomic.Int32

func init() { forced.Store(-1) }

// Current is the variant kernels use now: Best unless a test or option forced another.
func Current() Variant {
	if f := forced.Load(); f >= 0 {
		return Variant(f)
	}
	return Best()
}

// Force makes Current return v until the returned restore function is called. It fails
// if the CPU cannot run v, so a forced variant never executes an illegal instruction.
func Force(v Variant) (restore func(), err error) {
	if !Supports(v) {
		return func() {}, fmt.Errorf("cpu: this CPU cannot run the %s variant", v)
	}
	old := forced.Swap(int32(v))
	return func() { forced.Store(old) }, nil
}

// DetectionOff reports a build with the noasm tag, under which klauspost/cpuid detects no
// feature: the SIMD kernels can then not be chosen (kernelrt's own tag is purego).
func DetectionOff() bool { return detectionOff }

// Model is the CPU brand string, for reports.
func Model() string { return cpuid.CPU.BrandName }
