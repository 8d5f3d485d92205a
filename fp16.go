package kernelrt

import "github.com/kernelrt/kernelrt/internal/generic"

// FP16ToFP32 converts an IEEE half-precision value (the d of a quantized block) to float32
// exactly. NaN payloads are kept, shifted into the float32 mantissa.
func FP16ToFP32(h uint16) float32 { return generic.FP16ToFP32(h) }

// FP32ToFP16 converts f to the nearest IEEE half, ties to even, as the quantizers store d:
// values from 65520 up become Inf, values below 2^-25 become zero, NaN stays NaN.
func FP32ToFP16(f float32) uint16 { return generic.FP32ToFP16(f) }
